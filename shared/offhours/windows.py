"""When a schedule is on: wall-clock windows turned into instants (pure).

Windows are wall-clock times in the schedule's time zone, so their instants move
with daylight saving. A local time the clock skips (02:30 on a spring-forward night)
is taken at the first instant the clock reads at or past it (the jump, 03:00); a
local time that happens twice (02:30 on a fall-back night) at its first occurrence.
A window therefore keeps its wall-clock length except across a transition, where it
is an hour shorter or longer — what the people working those hours see.

A pool should be up from ``lead`` before a window starts (creating a pool takes
minutes, and it must be ready when people arrive) until the window ends.
Overlapping windows are merged. Holidays are handled by the schedule: no window
starts on one.
"""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass
from zoneinfo import ZoneInfo

from shared.config.offhours import Schedule

__all__ = ["Desired", "Interval", "desired_state", "intervals", "local_instant"]

UTC = dt.UTC
# How far from "now" windows are looked for: a schedule may be off for weeks (a
# holiday season); beyond this the next change is reported as unknown.
_SEARCH_DAYS = 32


def _naive_local(instant: dt.datetime, zone: ZoneInfo) -> dt.datetime:
    return instant.astimezone(zone).replace(tzinfo=None)


def local_instant(day: dt.date, minute: int, zone: ZoneInfo) -> dt.datetime:
    """The first instant (UTC) at which the wall clock in ``zone`` reads at or past
    ``minute`` minutes after midnight of ``day`` (1440 is the next midnight)."""
    wall = dt.datetime.combine(day, dt.time()) + dt.timedelta(minutes=minute)
    first = wall.replace(tzinfo=zone, fold=0).astimezone(UTC)
    second = wall.replace(tzinfo=zone, fold=1).astimezone(UTC)
    low, high = min(first, second), max(first, second)
    if _naive_local(low, zone) >= wall:
        return low
    # In a gap: the clock jumps past ``wall`` somewhere in (low, high]; find the jump
    # to the minute (transitions fall on whole minutes).
    lo, hi = low, high
    while hi - lo > dt.timedelta(minutes=1):
        mid = lo + (hi - lo) / 2
        mid = mid.replace(second=0, microsecond=0)
        if mid <= lo:
            break
        if _naive_local(mid, zone) >= wall:
            hi = mid
        else:
            lo = mid
    return hi


@dataclass(frozen=True, slots=True)
class Interval:
    """On-hours as instants; ``start`` is when the first merged window starts."""

    start: dt.datetime
    end: dt.datetime
    label: str  # e.g. "Mon 07:00-19:00"


def intervals(schedule: Schedule, at: dt.datetime, days: int = _SEARCH_DAYS) -> list[Interval]:
    """The schedule's on-hours starting within ``days`` local days of ``at``, sorted
    and merged where they overlap or touch."""
    zone = schedule.zone
    today = at.astimezone(zone).date()
    raw: list[Interval] = []
    for offset in range(-days, days + 1):
        day = today + dt.timedelta(days=offset)
        for window in schedule.windows_on(day):
            begin = window.start.hour * 60 + window.start.minute
            raw.append(Interval(local_instant(day, begin, zone),
                                local_instant(day, begin + window.minutes, zone),
                                f"{day:%a} {window.text()}"))
    raw.sort(key=lambda i: i.start)
    merged: list[Interval] = []
    for item in raw:
        if merged and item.start <= merged[-1].end:
            last = merged[-1]
            if item.end > last.end:
                merged[-1] = Interval(last.start, item.end, f"{last.label}, {item.label}")
        else:
            merged.append(item)
    return merged


@dataclass(frozen=True, slots=True)
class Desired:
    """What a scheduled pool should be at one instant, and why."""

    on: bool
    # Identifies the current period, stable across the ticks within it: the start of
    # the on-hours being served, or of the off-hours (when the last on-hours ended).
    period: str
    since: dt.datetime | None  # when this period began (None: not within the search)
    until: dt.datetime | None  # when the pool should change next
    reason: str


def _clock(instant: dt.datetime | None, zone: ZoneInfo) -> str:
    if instant is None:
        return "(not within a month)"
    return f"{instant.astimezone(zone):%a %Y-%m-%d %H:%M %Z}"


def desired_state(schedule: Schedule, name: str, at: dt.datetime,
                  lead_minutes: int) -> Desired:
    """Whether pools on ``schedule`` should be up at ``at`` (aware), with the reason."""
    lead = dt.timedelta(minutes=lead_minutes)
    zone = schedule.zone
    found = intervals(schedule, at)
    for item in found:
        if item.start - lead <= at < item.end:
            early = at < item.start
            why = (f"schedule {name}: on-hours {item.label} ({schedule.time_zone}) start "
                   f"{_clock(item.start, zone)}; restoring {lead_minutes} min early"
                   if early else
                   f"schedule {name}: on-hours {item.label} ({schedule.time_zone}) until "
                   f"{_clock(item.end, zone)}")
            return Desired(True, f"on-{item.start.isoformat()}", item.start, item.end, why)
    before = [i for i in found if i.end <= at]
    after = [i for i in found if i.start - lead > at]
    since = before[-1].end if before else None
    nxt = after[0].start if after else None
    local_day = at.astimezone(zone).date()
    holiday = f" (holiday {local_day})" if local_day in schedule.holidays else ""
    why = (f"schedule {name}: off-hours{holiday} since {_clock(since, zone)}; on-hours again "
           f"{_clock(nxt, zone)}"
           + (f", restore starts {lead_minutes} min before" if nxt and lead_minutes else ""))
    period = f"off-{since.isoformat()}" if since else f"off-{local_day}"
    return Desired(False, period, since, nxt - lead if nxt else None, why)
