"""Team budgets: may a request of this team start, given the chip-hours it used?

Pure: it reads the team's budget (``teams.<team>.budget`` in the configuration), the
cached usage ``team_usage`` wrote (:class:`UsageSnapshot`) and the current time, and
either admits the request or raises PermanentError (field ``team``, rule ``budget``)
whose message gives the budget, the usage and when it resets. The I/O around it —
reading the cache from its ConfigMap, logging a warning — is ``shared.jobs.budget.gate``.

The rules:

* Days are UTC days; weeks start on Monday 00:00 UTC. A limit is reached when the usage
  is *at or above* it: a team with 0.2 chip-hours left could not even start a slice.
* When both limits are reached, the one named is the one that binds longer: the
  weekly one, since a new day does not lift it.
* Usage cached on an earlier UTC day (or ISO week) than now counts as nothing for the
  day (or week): what the team used since midnight is not known yet, and it cannot
  have been over budget at midnight.
* Budgets are soft limits and must never block submissions because their plumbing is
  down: a snapshot older than :data:`MAX_USAGE_AGE` (or stamped that far ahead of the
  clock), a missing one, or one that does not cover the team admits the request with a
  warning for the caller to log.
  Half an hour is six missed ``team_usage`` ticks, long enough that one slow BigQuery
  query or a restarted function does not open the gate, short enough that a team
  cannot run on unchecked for long.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from datetime import UTC, date, datetime, time, timedelta
from typing import Annotated, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator

from shared.config import TeamBudget
from shared.errors import PermanentError

__all__ = ["BUDGET_RULE", "MAX_USAGE_AGE", "USAGE_CONFIGMAP", "USAGE_KEY", "BudgetDecision",
           "TeamUsage", "UsageSnapshot", "check_budget", "current_usage", "day_start", "has_budget",
           "hours_text", "next_day", "next_week", "until_text", "week_start"]

# The ConfigMap (in ``slices.state_namespace``) team_usage writes and submit_job reads,
# and the key of its data holding the snapshot as JSON.
USAGE_CONFIGMAP = "accelops-team-usage"
USAGE_KEY = "usage.json"
BUDGET_RULE = "budget"
MAX_USAGE_AGE = timedelta(minutes=30)

_Hours = Annotated[float, Field(ge=0, allow_inf_nan=False)]


class TeamUsage(BaseModel):
    """Chip-hours one team used on the snapshot's day and in its week (day included)."""

    model_config = ConfigDict(extra="ignore", frozen=True)

    today: _Hours = 0.0
    week: _Hours = 0.0


class UsageSnapshot(BaseModel):
    """What ``team_usage`` read from ``job_usage_daily`` at ``as_of``, for every team
    with a budget then (a team without usage rows has zeros)."""

    model_config = ConfigDict(extra="ignore", frozen=True)

    as_of: datetime
    day: date
    week_start: date
    teams: dict[str, TeamUsage] = Field(default_factory=dict)

    @field_validator("as_of")
    @classmethod
    def _aware(cls, value: datetime) -> datetime:
        # Written in UTC; one without an offset is read as UTC rather than refused.
        return value if value.tzinfo is not None else value.replace(tzinfo=UTC)


@dataclass(frozen=True, slots=True)
class BudgetDecision:
    """An admitted request: ``checked`` says whether usage was compared at all, and
    ``warning`` why not when it should have been (to be logged, never refused)."""

    checked: bool
    warning: str | None = None


def has_budget(budget: TeamBudget) -> bool:
    return budget.chip_hours_per_day is not None or budget.chip_hours_per_week is not None


def day_start(now: datetime) -> datetime:
    """00:00 UTC of ``now``'s UTC day."""
    return datetime.combine(now.astimezone(UTC).date(), time(), UTC)


def week_start(now: datetime) -> datetime:
    """Monday 00:00 UTC of ``now``'s ISO week."""
    today = day_start(now)
    return today - timedelta(days=today.weekday())


def next_day(now: datetime) -> datetime:
    """The next UTC midnight after ``now`` (strictly after: at 00:00 it is tomorrow's)."""
    return day_start(now) + timedelta(days=1)


def next_week(now: datetime) -> datetime:
    """The next Monday 00:00 UTC after ``now``."""
    return week_start(now) + timedelta(weeks=1)


def hours_text(hours: float) -> str:
    """Chip-hours for people: at most two decimals, no trailing zeros (``800``, ``0.5``)."""
    return f"{hours:,.2f}".rstrip("0").rstrip(".")


def until_text(now: datetime, then: datetime) -> str:
    """``in Nh Mm``, minutes rounded up so that a reset a few seconds away is not "0m"."""
    minutes = max(0, math.ceil((then - now).total_seconds() / 60))
    return f"in {minutes // 60}h {minutes % 60}m"


@dataclass(frozen=True, slots=True)
class _Limit:
    period: Literal["daily", "weekly"]
    budget: float
    used: float
    resets: datetime

    @property
    def reached(self) -> bool:
        return self.used >= self.budget

    def sentence(self, now: datetime) -> str:
        span = "today (UTC)" if self.period == "daily" else "this week (since Monday 00:00 UTC)"
        return (f"{hours_text(self.used)} of {hours_text(self.budget)} chip-hours used {span}; "
                f"it resets at {self.resets.strftime('%Y-%m-%dT%H:%M:%SZ')} "
                f"({until_text(now, self.resets)})")


def current_usage(snapshot: UsageSnapshot, team: str, now: datetime) -> TeamUsage | None:
    """The team's usage in ``now``'s day and week, as far as the snapshot tells (None
    when it does not cover the team): usage of an earlier day or week than now's says
    nothing about the current one, which counts as nothing used yet."""
    usage = snapshot.teams.get(team)
    if usage is None:
        return None
    return TeamUsage(today=usage.today if snapshot.day == day_start(now).date() else 0.0,
                     week=usage.week if snapshot.week_start == week_start(now).date() else 0.0)


def check_budget(team: str, budget: TeamBudget, snapshot: UsageSnapshot | None,
                 now: datetime) -> BudgetDecision:
    """Admit a request of ``team`` or refuse it for its budget.

    ``now`` is timezone-aware. Raises PermanentError (field ``team``, rule ``budget``)
    naming the binding limit, its usage and its reset when the team has reached a
    limit; otherwise returns how the request was admitted (see the module docstring
    for the fail-open cases).
    """
    if not has_budget(budget):
        return BudgetDecision(checked=False)
    if snapshot is None:
        return BudgetDecision(False, f"no cached usage (ConfigMap {USAGE_CONFIGMAP} missing): "
                                     f"team {team!r} admitted without a budget check")
    age = now - snapshot.as_of
    if abs(age) > MAX_USAGE_AGE:
        # Far ahead of this clock is no better: nothing says when it was true.
        when = "old" if age > timedelta(0) else "ahead of this clock"
        return BudgetDecision(False, f"cached usage is {int(abs(age).total_seconds() // 60)} "
                                     f"minutes {when} (as of {snapshot.as_of.isoformat()}; more "
                                     f"than {int(MAX_USAGE_AGE.total_seconds() // 60)} is "
                                     f"stale): team {team!r} admitted without a budget check")
    usage = current_usage(snapshot, team, now)
    if usage is None:
        return BudgetDecision(False, f"cached usage as of {snapshot.as_of.isoformat()} does not "
                                     f"cover team {team!r} (its budget is newer): admitted "
                                     "without a budget check")
    limits = []
    if budget.chip_hours_per_day is not None:
        limits.append(_Limit("daily", budget.chip_hours_per_day, usage.today, next_day(now)))
    if budget.chip_hours_per_week is not None:
        limits.append(_Limit("weekly", budget.chip_hours_per_week, usage.week, next_week(now)))
    reached = [limit for limit in limits if limit.reached]
    if not reached:
        return BudgetDecision(checked=True)
    # The limit that binds is the one lifted last.
    binding = max(reached, key=lambda limit: (limit.resets, limit.period == "weekly"))
    message = (f"team {team!r} has reached its {binding.period} budget: "
               f"{binding.sentence(now)}")
    others = [limit for limit in reached if limit is not binding]
    for other in others:
        message += f"; its {other.period} budget is reached too: {other.sentence(now)}"
    raise PermanentError(message, field="team", rule=BUDGET_RULE)
