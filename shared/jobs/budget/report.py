"""``accelops jobs usage`` as text: each team's usage against its budget (pure).

It prints what ``submit_job`` decides from — the cached snapshot and the rule of
``shared.jobs.budget.model`` at the same instant — so a team's status here is the answer
its next request would get.
"""

from __future__ import annotations

from datetime import datetime
from typing import TYPE_CHECKING

from shared.errors import PermanentError
from shared.jobs.budget.model import (
    MAX_USAGE_AGE,
    USAGE_CONFIGMAP,
    UsageSnapshot,
    check_budget,
    current_usage,
    has_budget,
    hours_text,
)

if TYPE_CHECKING:
    from shared.config import AccelopsConfig, TeamBudget

__all__ = ["usage_text"]


def _against(used: float | None, limit: float | None) -> str:
    if used is None:
        return "-"
    return f"{hours_text(used)} / {hours_text(limit)}" if limit is not None else hours_text(used)


def _status(team: str, budget: TeamBudget, snapshot: UsageSnapshot | None, now: datetime) -> str:
    if not has_budget(budget):
        return "no budget"
    try:
        decision = check_budget(team, budget, snapshot, now)
    except PermanentError as exc:
        # The refusal without the team's name, which the row already says.
        return "refused, " + exc.message.removeprefix(f"team {team!r} has reached its ")
    return "admitted" if decision.checked else "admitted (usage unknown: not checked)"


def usage_text(config: AccelopsConfig, snapshot: UsageSnapshot | None, now: datetime,
               namespace: str) -> str:
    """A header saying where the figures come from and how old they are, then one row
    per team: chip-hours today and this week (against the budget where there is one),
    and whether a request of the team would be admitted now."""
    where = f"ConfigMap {namespace}/{USAGE_CONFIGMAP}"
    if snapshot is None:
        header = f"no cached usage ({where} is missing: team_usage has not run yet)"
    else:
        age = max(0, int((now - snapshot.as_of).total_seconds() // 60))
        stale = (" - stale, budgets are not enforced"
                 if abs(now - snapshot.as_of) > MAX_USAGE_AGE else "")
        header = (f"usage as of {snapshot.as_of:%Y-%m-%dT%H:%M:%SZ} ({age} min ago{stale}), "
                  f"from {where}")
    rows = [("team", "today (UTC)", "this week", "a request now")]
    for name, team in sorted(config.teams.items()):
        usage = current_usage(snapshot, name, now) if snapshot is not None else None
        rows.append((name,
                     _against(None if usage is None else usage.today,
                              team.budget.chip_hours_per_day),
                     _against(None if usage is None else usage.week,
                              team.budget.chip_hours_per_week),
                     _status(name, team.budget, snapshot, now)))
    widths = [max(len(row[i]) for row in rows) for i in range(3)]
    lines = ["  ".join([*(cell.ljust(w) for cell, w in zip(row[:3], widths, strict=True)),
                        row[3]]) for row in rows]
    return "\n".join([header, "", *lines])
