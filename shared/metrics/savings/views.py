"""Reading what off-hours node-pool removal saved: typed rows of ``pool_savings_daily``.

A window is given as a duration back from now (``7d``, ``36h``, ``2w``) and covers
whole UTC days (:mod:`shared.metrics.window`), today's still-growing figures included. One
parameterised query per read; the summing per pool and team for totals is done here
(:func:`totals`), from the same rows the table shows, so the totals always add up.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from datetime import date, timedelta
from typing import Any, Protocol

from shared.metrics.reader import DatasetReader
from shared.metrics.savings.sql import POOL_SAVINGS_DAILY
from shared.metrics.window import first_day

__all__ = ["BigQuerySavings", "PoolSavings", "SavingsSource", "SavingsTotal", "totals"]


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
        """The days of the window (see :func:`shared.metrics.window.first_day`), oldest
        first."""
        ...


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


class BigQuerySavings(DatasetReader):
    """``pool_savings_daily`` of one dataset, read with a parameterised query."""

    def pool_savings(self, since: timedelta) -> list[PoolSavings]:
        rows = self._rows(
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
