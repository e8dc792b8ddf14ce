"""Reading what off-hours node-pool removal saved: typed rows of ``pool_savings_daily``.

A window is given as a duration back from now (``7d``, ``36h``, ``2w``:
:func:`parse_since`) and covers whole UTC days: every day from the one the duration
reaches back into up to today, today's still-growing figures included. One
parameterised query per read; the summing per pool and team for totals is done here
(:func:`totals`), from the same rows the table shows, so the totals always add up.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import UTC, date, datetime, timedelta
from typing import Any, Protocol

from shared.metrics.savings_sql import POOL_SAVINGS_DAILY
from shared.metrics.schema import Names

__all__ = ["DEFAULT_SINCE", "BigQuerySavings", "PoolSavings", "SavingsSource", "SavingsTotal",
           "first_day", "parse_since", "totals"]

DEFAULT_SINCE = "7d"
_SINCE = re.compile(r"^([1-9][0-9]{0,3})([hdw])$")
_UNITS = {"h": timedelta(hours=1), "d": timedelta(days=1), "w": timedelta(weeks=1)}
# BigQuery keeps at most this far back in practice; anything longer is a typo.
_MAX_SINCE = timedelta(days=3660)


@dataclass(frozen=True)
class PoolSavings:
    """One row of ``pool_savings_daily``: one UTC day of one pool's removals."""

    day: date
    team: str | None
    project: str
    location: str
    cluster: str
    pool: str
    accelerator_type: str | None
    removed_hours: float
    accelerator_hours_saved: float
    # Removal intervals that overlap the day; still_removed: one has no restore yet.
    intervals: int = 0
    still_removed: bool = False


@dataclass(frozen=True)
class SavingsTotal:
    """A pool's (or everyone's, with ``pool`` None) sums over a window."""

    team: str | None
    cluster: str | None
    pool: str | None
    accelerator_type: str | None
    removed_hours: float
    accelerator_hours_saved: float


class SavingsSource(Protocol):
    """Where the savings are read from; raises ``TransientError`` when unreachable."""

    def pool_savings(self, since: timedelta) -> list[PoolSavings]:
        """The days of the window (see :func:`first_day`), oldest first."""
        ...


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


def totals(rows: Iterable[PoolSavings]) -> tuple[list[SavingsTotal], SavingsTotal]:
    """Each pool's sums (most accelerator-hours saved first) and the grand total."""
    pools: dict[tuple[Any, ...], list[float]] = {}
    for row in rows:
        key = (row.team, row.project, row.location, row.cluster, row.pool, row.accelerator_type)
        sums = pools.setdefault(key, [0.0, 0.0])
        sums[0] += row.removed_hours
        sums[1] += row.accelerator_hours_saved
    per_pool = [SavingsTotal(team, cluster, pool, kind, hours, saved)
                for (team, _, _, cluster, pool, kind), (hours, saved) in pools.items()]
    per_pool.sort(key=lambda t: (-t.accelerator_hours_saved, t.team or "", t.cluster or "",
                                 t.pool or ""))
    return per_pool, SavingsTotal(None, None, None, None,
                                  sum(t.removed_hours for t in per_pool),
                                  sum(t.accelerator_hours_saved for t in per_pool))


class BigQuerySavings:
    """``pool_savings_daily`` of one dataset, read with a parameterised query."""

    def __init__(self, names: Names) -> None:
        self.names = names
        self.queries = 0

    @classmethod
    def from_env(cls) -> BigQuerySavings:
        """From ``ACCELOPS_PROJECT`` and the config's ``metrics`` section.

        Raises ConfigError when ``ACCELOPS_PROJECT`` is unset.
        """
        from shared.metrics.views import names_from_env

        return cls(names_from_env())

    def pool_savings(self, since: timedelta) -> list[PoolSavings]:
        from shared import bigquery

        self.queries += 1
        rows = bigquery.query(
            self.names.project,
            f"SELECT * FROM {self.names.sql(POOL_SAVINGS_DAILY)} "
            "WHERE day >= CAST(@first_day AS DATE) "
            "ORDER BY day, team, project, location, cluster, pool, accelerator_type",
            {"first_day": first_day(since).isoformat()})
        return [_typed(row) for row in rows]


def _typed(row: dict[str, Any]) -> PoolSavings:
    return PoolSavings(
        day=row["day"], team=row["team"], project=row["project"], location=row["location"],
        cluster=row["cluster"], pool=row["pool"], accelerator_type=row["accelerator_type"],
        removed_hours=float(row["removed_hours"] or 0.0),
        accelerator_hours_saved=float(row["accelerator_hours_saved"] or 0.0),
        intervals=int(row["intervals"] or 0), still_removed=bool(row["still_removed"]))
