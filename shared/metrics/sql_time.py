"""Time arithmetic the views share, as BigQuery SQL fragments (pure).

Durations are ``TIMESTAMP_DIFF(..., MICROSECOND)`` divided down: BigQuery's HOUR and
SECOND parts count whole units, and the emulator counts boundaries crossed instead, so
only microseconds mean the same on both. Intervals are attributed to UTC days by
splitting them at midnight (:func:`utc_days`).
"""

from __future__ import annotations

__all__ = ["hours", "seconds", "utc_days"]

_MICROS_PER_SECOND = 1_000_000
_MICROS_PER_HOUR = 3_600_000_000


def seconds(until: str, since: str) -> str:
    return f"TIMESTAMP_DIFF({until}, {since}, MICROSECOND) / {_MICROS_PER_SECOND}"


def hours(until: str, since: str) -> str:
    return f"TIMESTAMP_DIFF({until}, {since}, MICROSECOND) / {_MICROS_PER_HOUR}"


def utc_days(source: str, start: str, end: str) -> str:
    """A SELECT of ``source``'s rows once per UTC day their [start, end] touches, with
    ``day`` and the part of the interval within it (``day_from``, ``day_until``; empty
    parts are the caller's to drop with ``day_until > day_from``)."""
    return f"""SELECT
    {source}.*,
    day,
    GREATEST({start}, TIMESTAMP(day)) AS day_from,
    LEAST({end}, TIMESTAMP_ADD(TIMESTAMP(day), INTERVAL 1 DAY)) AS day_until
  FROM {source}, UNNEST(GENERATE_DATE_ARRAY(DATE({start}), DATE({end}))) AS day"""
