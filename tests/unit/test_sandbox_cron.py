"""When the sandbox's Cloud Scheduler fires a job: a unix-cron schedule read in an
IANA time zone, with cron's answers across daylight saving time changes."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from sandbox.cloud_scheduler.cron import CronSchedule


def utc(*fields: int) -> datetime:
    return datetime(*fields, tzinfo=UTC)  # type: ignore[misc]


def local(schedule: CronSchedule, moments: list[datetime]) -> list[str]:
    return [m.astimezone(schedule.zone).isoformat() for m in moments]


BERLIN_0230 = CronSchedule("30 2 * * *", "Europe/Berlin")


def test_a_daily_berlin_job_runs_at_0230_local_time_on_either_side_of_summer_time():
    assert BERLIN_0230.times(utc(2026, 1, 10, 12), 2) == [utc(2026, 1, 11, 1, 30),
                                                         utc(2026, 1, 12, 1, 30)]
    assert BERLIN_0230.times(utc(2026, 7, 10, 12), 2) == [utc(2026, 7, 11, 0, 30),
                                                         utc(2026, 7, 12, 0, 30)]


def test_when_0230_does_not_exist_at_spring_forward_the_job_runs_once_at_0300():
    # 2026-03-29: Berlin's clocks go from 02:00 CET to 03:00 CEST.
    assert local(BERLIN_0230, BERLIN_0230.times(utc(2026, 3, 27, 12), 4)) == [
        "2026-03-28T02:30:00+01:00",
        "2026-03-29T03:00:00+02:00",
        "2026-03-30T02:30:00+02:00",
        "2026-03-31T02:30:00+02:00",
    ]


def test_when_0230_happens_twice_at_fall_back_the_job_runs_once_on_the_first_pass():
    # 2026-10-25: Berlin's clocks go from 03:00 CEST back to 02:00 CET.
    assert local(BERLIN_0230, BERLIN_0230.times(utc(2026, 10, 23, 12), 4)) == [
        "2026-10-24T02:30:00+02:00",
        "2026-10-25T02:30:00+02:00",
        "2026-10-26T02:30:00+01:00",
        "2026-10-27T02:30:00+01:00",
    ]


def test_during_the_second_pass_of_the_repeated_hour_the_next_run_is_the_next_day():
    second_pass_0215 = utc(2026, 10, 25, 1, 15)  # 02:15 CET, after 02:30 CEST has gone
    assert BERLIN_0230.next_after(second_pass_0215) == utc(2026, 10, 26, 1, 30)


def test_an_every_30_minutes_job_follows_elapsed_time_through_both_dst_changes():
    every_30 = CronSchedule("*/30 * * * *", "Europe/Berlin")
    assert local(every_30, every_30.times(utc(2026, 10, 24, 23, 45), 5)) == [
        "2026-10-25T02:00:00+02:00",
        "2026-10-25T02:30:00+02:00",
        "2026-10-25T02:00:00+01:00",
        "2026-10-25T02:30:00+01:00",
        "2026-10-25T03:00:00+01:00",
    ]
    assert local(every_30, every_30.times(utc(2026, 3, 29, 0, 15), 3)) == [
        "2026-03-29T01:30:00+01:00",
        "2026-03-29T03:00:00+02:00",
        "2026-03-29T03:30:00+02:00",
    ]


def test_a_new_york_weekday_job_keeps_0900_local_when_the_us_changes_clocks():
    # The US springs forward on Sunday 2026-03-08 and falls back on Sunday 2026-11-01;
    # from each Friday after 09:00 the next run is Monday 09:00, an hour apart in UTC.
    weekdays_0900 = CronSchedule("0 9 * * MON-FRI", "America/New_York")
    assert weekdays_0900.times(utc(2026, 3, 6, 15), 2) == [utc(2026, 3, 9, 13),
                                                          utc(2026, 3, 10, 13)]
    assert weekdays_0900.times(utc(2026, 10, 30, 15), 2) == [utc(2026, 11, 2, 14),
                                                            utc(2026, 11, 3, 14)]
    assert local(weekdays_0900, [weekdays_0900.next_after(utc(2026, 11, 6, 15))]) \
        == ["2026-11-09T09:00:00-05:00"]  # Friday after 09:00: Monday next


def test_the_next_run_is_strictly_after_the_given_moment():
    every_minute = CronSchedule("* * * * *")
    assert every_minute.next_after(utc(2026, 11, 21, 8, 0)) == utc(2026, 11, 21, 8, 1)
    assert every_minute.next_after(datetime(2026, 11, 21, 8, 0, 59, 999999, UTC)) \
        == utc(2026, 11, 21, 8, 1)


@pytest.mark.parametrize(("schedule", "time_zone", "complaint"), [
    ("0 0 * * * *", "Etc/UTC", "has 6 fields"),
    ("0 0 L * *", "Etc/UTC", "'L' is not a number"),
    ("0 0 * * *", "Europe/Nowhere", "time zone 'Europe/Nowhere'"),
    ("0 0 30 2 *", "Etc/UTC", "can never fire"),
])
def test_a_schedule_cloud_scheduler_would_refuse_or_that_never_fires_is_refused(
        schedule, time_zone, complaint):
    with pytest.raises(ValueError, match=complaint):
        CronSchedule(schedule, time_zone)
