"""Cloud Scheduler's schedule and time zone, checked when a job is defined.

Cloud Scheduler takes a unix-cron string of five fields — minute (0-59), hour
(0-23), day of month (1-31), month (1-12 or JAN-DEC), day of week (0-6 or
SUN-SAT; 7 is Sunday too) — each a comma-separated list of ``*``, a value, a
range ``a-b``, or ``*`` / a range followed by a step ``/n``; and an IANA time
zone name (Etc/UTC when none is given). The check here is that syntax and no
more: a seconds field, ``@daily``, ``L``, ``W``, ``#`` and ``?`` — which some crons
(and the sandbox's evaluator, cronsim) accept — are refused, so a definition
the API would refuse fails when it is written, not at ``terraform apply``.

Nothing here evaluates a schedule: when it fires is the scheduler's business
(Cloud Scheduler in production, ``sandbox/cloud_scheduler/cron.py`` locally). Time zones are
looked up with :mod:`zoneinfo`; the ``tzdata`` dependency supplies the database
on hosts without one.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

__all__ = ["check_schedule", "check_time_zone"]

_MONTHS = ("JAN", "FEB", "MAR", "APR", "MAY", "JUN", "JUL", "AUG", "SEP", "OCT", "NOV", "DEC")
_DAYS = ("SUN", "MON", "TUE", "WED", "THU", "FRI", "SAT")


@dataclass(frozen=True, slots=True)
class _Field:
    name: str
    low: int
    high: int
    names: tuple[str, ...] = ()  # names[i] stands for low + i

    def value(self, text: str) -> int:
        if text.upper() in self.names:
            return self.low + self.names.index(text.upper())
        if not (text.isascii() and text.isdigit()):
            raise ValueError(f"{text!r} is not a number" +
                             (f" or one of {'/'.join(self.names)}" if self.names else ""))
        number = int(text)
        if not self.low <= number <= self.high:
            raise ValueError(f"{number} is outside {self.low}-{self.high}")
        return number


_FIELDS = (
    _Field("minute", 0, 59),
    _Field("hour", 0, 23),
    _Field("day of month", 1, 31),
    _Field("month", 1, 12, _MONTHS),
    _Field("day of week", 0, 7, _DAYS),
)
# One list item: ``*`` or ``a`` or ``a-b``, and a step only after ``*`` or a range
# (unix cron reads ``5/10`` as an error, not as ``5-59/10``).
_ITEM = re.compile(
    r"(?:\*|(?P<first>[0-9A-Za-z]+)(?:-(?P<last>[0-9A-Za-z]+))?)(?:/(?P<step>[0-9A-Za-z]*))?")


def _check_item(item: str, field: _Field) -> None:
    match = _ITEM.fullmatch(item)
    if match is None:
        raise ValueError(f"{item!r} is not *, a value, a range a-b or a step */n, a-b/n")
    first, last, step = match["first"], match["last"], match["step"]
    if first is not None:
        start = field.value(first)
        if last is not None and field.value(last) < start:
            raise ValueError(f"the range {item!r} ends before it starts")
    if step is not None:
        if first is not None and last is None:
            raise ValueError(f"a step follows * or a range, not a single value ({item!r})")
        if not (step.isascii() and step.isdigit()) or int(step) == 0:
            raise ValueError(f"the step of {item!r} is not a positive number")


def check_schedule(schedule: str) -> None:
    """Refuse a schedule Cloud Scheduler would refuse.

    Raises ValueError naming the schedule, the field and the rule it breaks.
    """
    fields = schedule.split()
    if len(fields) != len(_FIELDS):
        count = f"{len(fields)} field" + ("" if len(fields) == 1 else "s")
        raise ValueError(f"schedule {schedule!r} has {count}; a unix-cron schedule "
                         "has 5: minute hour day-of-month month day-of-week")
    for text, field in zip(fields, _FIELDS, strict=True):
        for item in text.split(","):
            try:
                _check_item(item, field)
            except ValueError as exc:
                raise ValueError(f"schedule {schedule!r}, {field.name} {text!r}: {exc}") from None


def check_time_zone(time_zone: str) -> None:
    """Refuse a time zone that is not an IANA name (``Europe/Berlin``, ``Etc/UTC``).

    Raises ValueError naming it.
    """
    try:
        ZoneInfo(time_zone)
    except (ZoneInfoNotFoundError, ValueError, OSError):
        raise ValueError(f"time zone {time_zone!r} is not an IANA time zone name "
                         "(like Europe/Berlin or Etc/UTC)") from None
