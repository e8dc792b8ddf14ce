"""The usage team_usage caches: one query of ``job_usage_daily``, its rows as a snapshot.

One query for every team with a budget, today and this ISO week at once (the week's
rows include today's), so a tick costs one BigQuery job whatever the number of teams.
The days are parameters computed from the caller's "now" (the cluster's clock) rather
than ``CURRENT_DATE()``, so the snapshot's ``day`` and ``week_start`` are exactly the
ones its figures are for.

A budget counts ``chip_hours_used``: the chips a team's jobs held while they ran (split
at UTC midnights by the view). Idle slice time — provisioning before a job starts,
slices kept after it ends — is the platform's overhead and reported on its own
(``idle_chip_hours``), not charged to the team's budget.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from datetime import datetime
from typing import TYPE_CHECKING, Any

from shared.jobs.budget.model import TeamUsage, UsageSnapshot, day_start, week_start
from shared.metrics.usage.sql import JOB_USAGE_DAILY

if TYPE_CHECKING:
    from shared.metrics.names import Names

__all__ = ["usage_params", "usage_query", "usage_snapshot"]


def usage_query(names: Names) -> str:
    """Per team: chip-hours used on ``@today`` and from ``@week_start`` to ``@today``."""
    return f"""SELECT
  team,
  SUM(IF(day = CAST(@today AS DATE), IFNULL(chip_hours_used, 0.0), 0.0)) AS today,
  SUM(IFNULL(chip_hours_used, 0.0)) AS week
FROM {names.sql(JOB_USAGE_DAILY)}
WHERE day BETWEEN CAST(@week_start AS DATE) AND CAST(@today AS DATE)
  AND team IN UNNEST(@teams)
GROUP BY team"""


def usage_params(teams: Iterable[str], now: datetime) -> dict[str, Any]:
    """The query's parameters for ``teams`` at ``now`` (timezone-aware)."""
    return {"today": day_start(now).date().isoformat(),
            "week_start": week_start(now).date().isoformat(),
            "teams": sorted(set(teams))}


def usage_snapshot(rows: Iterable[Mapping[str, Any]], teams: Iterable[str],
                   now: datetime) -> UsageSnapshot:
    """The snapshot of ``teams`` at ``now``: each team's row, zeros for a team without one
    (it used nothing this week), rows of other teams ignored."""
    wanted = set(teams)
    used = {str(row["team"]): TeamUsage(today=max(0.0, float(row["today"] or 0.0)),
                                        week=max(0.0, float(row["week"] or 0.0)))
            for row in rows if row.get("team") in wanted}
    return UsageSnapshot(as_of=now, day=day_start(now).date(), week_start=week_start(now).date(),
                         teams={team: used.get(team, TeamUsage()) for team in sorted(wanted)})
