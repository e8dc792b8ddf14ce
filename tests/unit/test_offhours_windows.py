"""Off-hours schedules in wall-clock time: time zones, daylight saving, midnight, holidays."""

from __future__ import annotations

import datetime as dt
from zoneinfo import ZoneInfo

import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st

from shared.config import parse_config
from shared.config.offhours import MAX_CLUSTERS, Schedule, Window
from shared.errors import ConfigError
from shared.offhours.windows import desired_state, intervals, local_instant

UTC = dt.UTC
ZONES = ("Europe/Berlin", "America/New_York", "Australia/Lord_Howe", "Asia/Kolkata", "UTC")
# Transition days of 2026 (and ordinary days) in those zones.
DAYS = (dt.date(2026, 3, 29), dt.date(2026, 10, 25), dt.date(2026, 3, 8),
        dt.date(2026, 11, 1), dt.date(2026, 4, 5), dt.date(2026, 10, 4),
        dt.date(2026, 11, 23), dt.date(2026, 6, 15))


def schedule(text: str) -> Schedule:
    return parse_config(f"schedules:\n  s:\n{text}").schedules["s"]


def brute_force_instant(day: dt.date, minute: int, zone: ZoneInfo) -> dt.datetime:
    """The first UTC minute whose wall clock reads at or past the local time: scanned."""
    wall = dt.datetime.combine(day, dt.time()) + dt.timedelta(minutes=minute)
    instant = dt.datetime.combine(day, dt.time(), tzinfo=UTC) - dt.timedelta(hours=16)
    while instant.astimezone(zone).replace(tzinfo=None) < wall:
        instant += dt.timedelta(minutes=1)
    return instant


@settings(max_examples=60, deadline=None)
@given(st.sampled_from(ZONES), st.sampled_from(DAYS),
       st.integers(min_value=0, max_value=1440))
def test_a_wall_clock_time_becomes_the_first_instant_the_clock_shows_it(
        zone: str, day: dt.date, minute: int) -> None:
    tz = ZoneInfo(zone)
    assert local_instant(day, minute, tz) == brute_force_instant(day, minute, tz)


def test_a_window_starting_in_the_spring_forward_gap_starts_when_the_clock_jumps() -> None:
    berlin = ZoneInfo("Europe/Berlin")
    # 02:30 does not exist on 2026-03-29 in Berlin: the clock goes 02:00 CET -> 03:00 CEST.
    start = local_instant(dt.date(2026, 3, 29), 150, berlin)
    assert start == dt.datetime(2026, 3, 29, 1, 0, tzinfo=UTC)
    assert start.astimezone(berlin).strftime("%H:%M %Z") == "03:00 CEST"


def test_a_window_at_a_time_that_happens_twice_starts_at_the_first() -> None:
    berlin = ZoneInfo("Europe/Berlin")
    start = local_instant(dt.date(2026, 10, 25), 150, berlin)
    assert start == dt.datetime(2026, 10, 25, 0, 30, tzinfo=UTC)  # 02:30 CEST, not CET


@pytest.mark.parametrize(("day", "hours"), [
    (dt.date(2026, 3, 28), 24), (dt.date(2026, 3, 29), 23),  # spring forward: 23 h
    (dt.date(2026, 10, 25), 25), (dt.date(2026, 11, 23), 24)])  # fall back: 25 h
def test_an_all_day_window_lasts_as_long_as_that_local_day(day: dt.date, hours: int) -> None:
    s = schedule("    time_zone: Europe/Berlin\n    on_hours: {daily: ['00:00-24:00']}\n")
    noon = dt.datetime.combine(day, dt.time(12), tzinfo=ZoneInfo("Europe/Berlin"))
    found = [i for i in intervals(s, noon, days=0)]
    assert len(found) == 1
    assert found[0].end - found[0].start == dt.timedelta(hours=hours)


@settings(max_examples=60, deadline=None)
@given(st.sampled_from(ZONES[:3]), st.sampled_from(DAYS),
       st.integers(min_value=0, max_value=23), st.integers(min_value=1, max_value=23))
def test_a_window_keeps_its_wall_clock_length_but_for_the_offset_change_within_it(
        zone: str, day: dt.date, start_hour: int, hours: int) -> None:
    tz = ZoneInfo(zone)
    begin = local_instant(day, start_hour * 60, tz)
    end = local_instant(day, start_hour * 60 + hours * 60, tz)
    wall = [dt.datetime.combine(day, dt.time()) + dt.timedelta(hours=h)
            for h in (start_hour, start_hour + hours)]
    # Where a wall time falls in a gap the window snaps to the jump (tested above).
    assume(all(i.astimezone(tz).replace(tzinfo=None) == w
               for i, w in zip((begin, end), wall, strict=True)))
    shift = end.astimezone(tz).utcoffset() - begin.astimezone(tz).utcoffset()  # type: ignore[operator]
    assert end - begin == dt.timedelta(hours=hours) - shift


def test_a_window_over_midnight_runs_into_the_next_day() -> None:
    s = schedule("    time_zone: America/New_York\n    on_hours: {friday: '22:00-06:00'}\n")
    ny = ZoneInfo("America/New_York")
    at = lambda d, h, m=0: dt.datetime(2026, 11, d, h, m, tzinfo=ny)  # noqa: E731
    assert not desired_state(s, "s", at(27, 21, 59), 0).on
    assert desired_state(s, "s", at(27, 23, 30), 0).on
    assert desired_state(s, "s", at(28, 5, 59), 0).on
    assert not desired_state(s, "s", at(28, 6, 0), 0).on


def test_the_restore_starts_the_lead_time_before_the_window() -> None:
    s = schedule("    time_zone: Europe/Berlin\n    on_hours: {weekdays: ['07:00-19:00']}\n")
    berlin = ZoneInfo("Europe/Berlin")
    assert not desired_state(s, "s", dt.datetime(2026, 11, 24, 6, 29, tzinfo=berlin), 30).on
    early = desired_state(s, "s", dt.datetime(2026, 11, 24, 6, 30, tzinfo=berlin), 30)
    assert early.on
    assert "30 min early" in early.reason
    # The removal is not brought forward: on-hours last until 19:00.
    assert desired_state(s, "s", dt.datetime(2026, 11, 24, 18, 59, tzinfo=berlin), 30).on
    assert not desired_state(s, "s", dt.datetime(2026, 11, 24, 19, 0, tzinfo=berlin), 30).on


def test_no_window_starts_on_a_holiday_and_the_reason_says_so() -> None:
    s = schedule("    time_zone: Europe/Berlin\n    on_hours: {weekdays: ['07:00-19:00']}\n"
                 "    holidays: ['2026-12-24', '2026-12-25']\n")
    berlin = ZoneInfo("Europe/Berlin")
    state = desired_state(s, "s", dt.datetime(2026, 12, 24, 12, tzinfo=berlin), 30)
    assert not state.on
    assert "holiday 2026-12-24" in state.reason
    # Off from Wednesday 19:00 until Monday 07:00 (minus the lead): one period.
    assert state.since == dt.datetime(2026, 12, 23, 19, tzinfo=berlin)
    assert state.until == dt.datetime(2026, 12, 28, 6, 30, tzinfo=berlin)
    assert desired_state(s, "s", dt.datetime(2026, 12, 26, 12, tzinfo=berlin), 30).period == \
        state.period


@settings(max_examples=40, deadline=None)
@given(st.sampled_from(ZONES), st.datetimes(min_value=dt.datetime(2026, 1, 1),
                                           max_value=dt.datetime(2026, 12, 31)),
       st.sets(st.sampled_from([dt.date(2026, m, d) for m in range(1, 13) for d in (1, 15)]),
               max_size=6))
def test_nothing_is_on_during_a_holiday_unless_the_day_before_runs_into_it(
        zone: str, naive: dt.datetime, holidays: set[dt.date]) -> None:
    s = Schedule(time_zone=zone, on_hours={"daily": ["08:00-18:00"]},
                 holidays=tuple(sorted(holidays)))
    at = naive.replace(tzinfo=UTC)
    local_day = at.astimezone(ZoneInfo(zone)).date()
    state = desired_state(s, "s", at, 0)
    if local_day in holidays:
        assert not state.on
    else:
        local_hour = at.astimezone(ZoneInfo(zone)).hour
        assert state.on == (8 <= local_hour < 18)


def test_windows_that_overlap_are_one_period() -> None:
    s = schedule("    time_zone: UTC\n    on_hours: {monday: ['08:00-12:00', '11:00-18:00']}\n")
    found = intervals(s, dt.datetime(2026, 11, 23, 12, tzinfo=UTC), days=0)
    assert [(i.start.hour, i.end.hour) for i in found] == [(8, 18)]


@pytest.mark.parametrize(("text", "complaint"), [
    ("    time_zone: Mars/Olympus\n    on_hours: {daily: '08:00-18:00'}\n",
     "not an IANA time zone"),
    ("    time_zone: UTC\n    on_hours: {someday: '08:00-18:00'}\n", "is not a day"),
    ("    time_zone: UTC\n    on_hours: {daily: '8-18'}\n", "must be HH:MM-HH:MM"),
    ("    time_zone: UTC\n    on_hours: {daily: '08:00-18:00'}\n    lead: 3\n",
     "unknown field"),
])
def test_a_bad_schedule_is_refused_naming_the_key(text: str, complaint: str) -> None:
    with pytest.raises(ConfigError) as caught:
        schedule(text)
    assert complaint in caught.value.message
    assert "schedules.s" in caught.value.message


def test_a_schedule_name_must_be_usable_as_a_label_value() -> None:
    with pytest.raises(ConfigError, match="label value"):
        parse_config("schedules:\n  Office Hours:\n    time_zone: UTC\n"
                     "    on_hours: {daily: '08:00-18:00'}\n")


def test_a_window_prints_as_it_was_written() -> None:
    assert Window.parse("22:00-06:00").text() == "22:00-06:00"
    assert Window.parse("00:00-24:00").minutes == 1440


def test_pool_schedule_refuses_more_clusters_than_one_tick_keeps_clients_for() -> None:
    paths = [f"projects/p/locations/l/clusters/c{i}" for i in range(MAX_CLUSTERS + 1)]
    with pytest.raises(ConfigError, match=f"at most {MAX_CLUSTERS}"):
        parse_config(f"pool_schedule:\n  clusters: [{', '.join(paths)}]\n")
    config = parse_config(f"pool_schedule:\n  clusters: [{', '.join(paths[1:])}]\n")
    assert len(config.pool_schedule.clusters) == MAX_CLUSTERS
