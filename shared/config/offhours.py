"""The schedules in the configuration file, parsed at the boundary.

.. code-block:: yaml

    pool_schedule:
      lead_time_minutes: 30            # restores start this early (creation takes minutes)
      max_concurrent_operations: 4     # node-pool operations running at once per cluster
      clusters: []                     # projects/P/locations/L/clusters/C (at most 100);
                                       # empty: the cluster named by ACCELOPS_CLUSTER
    schedules:
      office-hours:                    # pools opt in with label accelops.dev/schedule=office-hours
        time_zone: Europe/Berlin
        on_hours:
          weekdays: ["07:00-19:00"]    # monday..sunday, weekdays, weekend, daily
          saturday: ["09:00-13:00"]
        holidays: ["2026-12-24", "2026-12-25"]

A window ``HH:MM-HH:MM`` starts on its day; an end at or before its start is on the
next day (``22:00-06:00`` runs over midnight), ``24:00`` is the end of the day. Times
are wall-clock times in the schedule's IANA time zone, so on-hours follow daylight
saving. On a holiday no window starts.
"""

from __future__ import annotations

import datetime as dt
import re
from typing import Annotated, Any
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from pydantic import BaseModel, ConfigDict, Field, field_validator

__all__ = ["DAYS", "MAX_CLUSTERS", "PoolScheduleConfig", "Schedule", "Window",
           "check_schedule_names"]

DAYS = ("monday", "tuesday", "wednesday", "thursday", "friday", "saturday", "sunday")
_GROUPS: dict[str, tuple[str, ...]] = {
    "weekdays": DAYS[:5], "weekend": DAYS[5:], "daily": DAYS,
    **{day: (day,) for day in DAYS},
}
_WINDOW = re.compile(r"^([01]\d|2[0-3]):([0-5]\d)-(([01]\d|2[0-3]):([0-5]\d)|24:00)$")
# Schedule names are label values (accelops.dev/schedule=<name>).
_NAME = re.compile(r"^[a-z0-9]([-a-z0-9_.]{0,61}[a-z0-9])?$")
_CLUSTER = re.compile(r"^projects/[^/]+/locations/[^/]+/clusters/[^/]+$")
# Every tick reads every listed cluster through a Kubernetes client kept per cluster;
# shared.kube keeps more clients than this, so none is rebuilt (and its endpoint
# discovered again) on every tick.
MAX_CLUSTERS = 100


class Window(BaseModel):
    """On-hours starting ``start`` on a day, for ``minutes`` (at most a day)."""

    model_config = ConfigDict(frozen=True)

    start: dt.time
    minutes: Annotated[int, Field(ge=1, le=1440)]

    @classmethod
    def parse(cls, text: str) -> Window:
        match = _WINDOW.match(text.strip())
        if not match:
            raise ValueError(f"window {text!r}: must be HH:MM-HH:MM (24-hour, end may be "
                             "24:00)")
        start = int(match[1]) * 60 + int(match[2])
        end = 1440 if match[3] == "24:00" else int(match[4]) * 60 + int(match[5])
        minutes = end - start if end > start else end + 1440 - start
        return cls(start=dt.time(start // 60, start % 60), minutes=minutes)

    def text(self) -> str:
        end = (self.start.hour * 60 + self.start.minute + self.minutes) % 1440
        return f"{self.start:%H:%M}-{end // 60:02d}:{end % 60:02d}"


class Schedule(BaseModel):
    """On-hours per weekday in one time zone; off-hours are everything else."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    time_zone: str
    on_hours: dict[str, tuple[Window, ...]]
    holidays: tuple[dt.date, ...] = ()
    # Overrides pool_schedule.lead_time_minutes for this schedule.
    lead_time_minutes: Annotated[int, Field(ge=0, le=720)] | None = None

    @field_validator("time_zone")
    @classmethod
    def _zone(cls, value: str) -> str:
        try:
            ZoneInfo(value)
        except (ZoneInfoNotFoundError, ValueError):
            raise ValueError(f"{value!r} is not an IANA time zone (e.g. Europe/Berlin)") \
                from None
        return value

    @field_validator("on_hours", mode="before")
    @classmethod
    def _days(cls, value: Any) -> dict[str, tuple[Window, ...]]:
        if not isinstance(value, dict):
            raise ValueError("must map days to lists of HH:MM-HH:MM windows")
        days: dict[str, list[Window]] = {}
        for key, windows in value.items():
            if key not in _GROUPS:
                raise ValueError(f"{key!r} is not a day: use {', '.join(DAYS)}, weekdays, "
                                 "weekend or daily")
            if isinstance(windows, str):
                windows = [windows]
            if not isinstance(windows, list):
                raise ValueError(f"{key}: must be a list of HH:MM-HH:MM windows")
            parsed = [w if isinstance(w, Window) else Window.parse(str(w)) for w in windows]
            for day in _GROUPS[key]:
                days.setdefault(day, []).extend(parsed)
        return {day: tuple(sorted(ws, key=lambda w: w.start)) for day, ws in days.items()}

    @property
    def zone(self) -> ZoneInfo:
        return ZoneInfo(self.time_zone)

    def windows_on(self, day: dt.date) -> tuple[Window, ...]:
        """The windows starting on that local date (none on a holiday)."""
        if day in self.holidays:
            return ()
        return self.on_hours.get(DAYS[day.weekday()], ())


class PoolScheduleConfig(BaseModel):
    """How pool_schedule applies the schedules."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    lead_time_minutes: Annotated[int, Field(ge=0, le=720)] = 30
    # Node-pool operations running at once in a cluster (those of reconcile_slices
    # count too); GKE's own limit has been seen at 5. A tick starts no more.
    max_concurrent_operations: Annotated[int, Field(ge=1, le=20)] = 4
    # Clusters whose pools are in scope, as projects/P/locations/L/clusters/C; empty:
    # the cluster the environment names.
    clusters: tuple[str, ...] = ()

    @field_validator("clusters")
    @classmethod
    def _paths(cls, value: tuple[str, ...]) -> tuple[str, ...]:
        for path in value:
            if not _CLUSTER.match(path):
                raise ValueError(f"{path!r}: must be projects/P/locations/L/clusters/C")
        if len(set(value)) != len(value):
            raise ValueError("a cluster is listed twice")
        if len(value) > MAX_CLUSTERS:
            raise ValueError(f"{len(value)} clusters: at most {MAX_CLUSTERS} (each tick "
                             "reads every one; split them across deployments)")
        return value


def check_schedule_names(schedules: dict[str, Schedule]) -> dict[str, Schedule]:
    """The schedules, when every name can be a label value; ValueError names the bad one."""
    for name in schedules:
        if not _NAME.match(name):
            raise ValueError(f"schedule name {name!r}: must be a label value (lowercase "
                             "letters, digits, '-', '_', '.'; at most 63 characters)")
    return schedules

