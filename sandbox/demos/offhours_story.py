"""How the schedule scenario tells its story: the day it plays, and its ticks.

:class:`Day` picks the evening and the morning from the schedule itself, so the
scenario follows whatever ``office-hours`` says. :class:`Story` prints each tick as
it happens, from what the tick logged and published: a pool's line when its
decision changes, with the audit row it published; ticks with nothing new are
summed up in one line (a busy pool is skipped again on every one of them).
"""

from __future__ import annotations

import datetime as dt
import itertools
from dataclasses import dataclass
from zoneinfo import ZoneInfo

from sandbox.demos.offhours_watch import Tick
from shared.config.offhours import Schedule
from shared.errors import AccelopsError
from shared.offhours.windows import intervals

__all__ = ["SETUP_BEFORE_CLOSE", "Day", "NoDayError", "Story"]

SETUP_BEFORE_CLOSE = dt.timedelta(minutes=90)  # pools are created on-hours, this early


class NoDayError(AccelopsError):
    pass


@dataclass(frozen=True, slots=True)
class Day:
    """The on-hours the scenario ends (``close``) and the next ones (``open``)."""

    close: dt.datetime
    open: dt.datetime
    lead: dt.timedelta
    zone: ZoneInfo

    @classmethod
    def after(cls, schedule: Schedule, now: dt.datetime, lead_minutes: int) -> Day:
        """The first on-hours that end late enough to set up the pools during them,
        and are followed by more the next morning (not a weekend)."""
        found = intervals(schedule, now)
        for first, second in itertools.pairwise(found):
            setup = first.end - SETUP_BEFORE_CLOSE
            if setup > max(now, first.start) and second.start - first.end < dt.timedelta(
                    days=1):
                return cls(first.end, second.start, dt.timedelta(minutes=lead_minutes),
                           schedule.zone)
        raise NoDayError("the schedule has no evening followed by a working morning in "
                         "the coming month")

    def clock(self, instant: dt.datetime, seconds: bool = False) -> str:
        return f"{instant.astimezone(self.zone):%a %H:%M{':%S' if seconds else ''} %Z}"


class Story:
    """Prints the ticks as they happen: a pool's line when its decision changes, with
    the audit row it published; ticks with nothing new are summed up in one line."""

    def __init__(self, day: Day) -> None:
        self.day = day
        self._last: dict[str, str] = {}
        self._audited: set[str] = set()
        self._quiet: list[dt.datetime] = []
        self._still: set[str] = set()  # pools skipped again during the quiet ticks

    def reset(self) -> None:
        """Forget the quiet ticks so far (those before the story starts)."""
        self._quiet, self._still = [], set()

    def _flush(self) -> None:
        if not self._quiet:
            return
        first, last = self._quiet[0], self._quiet[-1]
        span = (f"{len(self._quiet)} ticks to {last.astimezone(self.day.zone):%H:%M}"
                if len(self._quiet) > 1 else "1 tick")
        still = f"; still busy: {', '.join(sorted(self._still))}" if self._still else ""
        print(f"   {self.day.clock(first):<14} {span}: nothing new{still}")
        self.reset()

    def event(self, when: dt.datetime, text: str) -> None:
        self._flush()
        print(f"   {self.day.clock(when):<14} {text}")

    def tick(self, tick: Tick) -> None:
        rows: dict[str, list[str]] = {}
        for row in tick.records:
            if row["action_id"] in self._audited:  # a skip, published again each tick
                self._still.add(row["pool"])
                continue
            self._audited.add(row["action_id"])
            method = f"/{row['method']}" if row.get("method") else ""
            rows.setdefault(row["pool"], []).append(f"{row['action']}{method}")
        lines = []
        for pool in sorted(set(tick.decisions) | set(rows)):
            note = tick.decisions.get(pool, self._last.get(pool, ""))
            if note == self._last.get(pool) and pool not in rows:
                continue
            self._last[pool] = note
            audit = f"  [pool_action {', '.join(rows[pool])}]" if pool in rows else ""
            lines.append(f"{pool:<13} {note}{audit}")
        if not lines:
            self._quiet.append(tick.at)
            return
        self._flush()
        when = self.day.clock(tick.at)
        for index, line in enumerate(lines):
            print(f"   {when if index == 0 else '':<14} {line}")

    def done(self) -> None:
        self._flush()
