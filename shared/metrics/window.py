"""A report's window: a duration back from now, covering whole UTC days.

``7d``, ``36h`` or ``2w`` (:func:`parse_since`) reach back from now; the window is
every UTC day from the one that duration reaches into up to today, today's
still-growing figures included (:func:`first_day`). The savings and jobs reports,
their dashboard pages and the command line all read windows this way.
"""

from __future__ import annotations

import re
from datetime import UTC, date, datetime, timedelta

__all__ = ["DEFAULT_SINCE", "SINCE_CHOICES", "first_day", "parse_since", "window_text"]

DEFAULT_SINCE = "7d"
#: The windows the dashboard pages offer as links.
SINCE_CHOICES = ("7d", "30d", "90d")
_SINCE = re.compile(r"^([1-9][0-9]{0,3})([hdw])$")
_UNITS = {"h": timedelta(hours=1), "d": timedelta(days=1), "w": timedelta(weeks=1)}
# BigQuery keeps at most this far back in practice; anything longer is a typo.
_MAX_SINCE = timedelta(days=3660)


def parse_since(text: str) -> timedelta:
    """``7d``, ``36h``, ``2w`` as a duration; ValueError names the rule."""
    match = _SINCE.match(text.strip())
    if match is None:
        raise ValueError(f"{text!r} is not a duration like 7d, 36h or 2w")
    since = int(match.group(1)) * _UNITS[match.group(2)]
    if since > _MAX_SINCE:
        raise ValueError(f"{text!r} reaches back more than ten years")
    return since


def first_day(since: timedelta, now: datetime | None = None) -> date:
    """The first UTC day of the window reaching ``since`` back from ``now``."""
    return ((now or datetime.now(UTC)) - since).astimezone(UTC).date()


def window_text(first: date, since: str) -> str:
    """``last 7d: 2025-03-01 to today (UTC)``."""
    return f"last {since}: {first.isoformat()} to today (UTC)"
