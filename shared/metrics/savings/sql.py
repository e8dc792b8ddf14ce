"""The SQL of ``pool_savings_daily``: accelerator-hours saved by removing node pools.

A pool is "removed" from its first ``remove`` until the next ``restore`` of the same
pool (project, location, cluster, pool), or until now while it has none. The rules,
each a step of the query:

* ``skip`` rows are left out: the pool stayed up;
* actions of a pool are ordered by ``at`` (a remove before a restore at the same
  instant, so such a pair is an empty interval, then by row key);
* a ``remove`` after a ``remove`` (a later tick, a retry under another key) changes
  nothing, nor does a ``restore`` after a ``restore``: only the first of each run is
  kept, so the kept actions alternate and each remove's next action is its restore;
* the interval is split at UTC midnights; each day's part counts its hours, and its
  hours times the pool's ``accelerator_count`` (taken from the remove) are the
  accelerator-hours saved.

Durations are ``TIMESTAMP_DIFF(..., MICROSECOND)``: BigQuery counts whole units, which
for SECOND or HOUR would drop the remainder of every interval (and the sandbox's
emulator counts unit boundaries instead, so coarse units would not even agree with it).
Hours are multiplied by the count in FLOAT64: microseconds times a large count could
overflow INT64, and an overflow fails the whole view. ``at`` is a reserved keyword in
GoogleSQL: as a bare column name it must be quoted (`` `at` ``), although the emulator
lets it pass in some places. The view reads ``pool_actions_unique``, so a redelivered
row is counted once.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from shared.metrics.sql_time import hours, utc_days

if TYPE_CHECKING:
    from shared.metrics.names import Names

__all__ = ["POOL_ACTIONS_UNIQUE", "POOL_SAVINGS_DAILY", "pool_savings_daily"]

POOL_ACTIONS_UNIQUE = "pool_actions_unique"
POOL_SAVINGS_DAILY = "pool_savings_daily"
_POOL = "PARTITION BY project, location, cluster, pool"
_ORDER = "ORDER BY `at`, IF(action = 'remove', 0, 1), row_key"


def pool_savings_daily(n: Names) -> str:
    """Per UTC day, team, pool and accelerator type: hours removed, accelerator-hours
    saved, the removal intervals that overlap the day and whether one is still open."""
    return f"""WITH actions AS (
  SELECT * FROM {n.sql(POOL_ACTIONS_UNIQUE)} WHERE action IN ('remove', 'restore')
), sequenced AS (
  SELECT *, LAG(action) OVER ({_POOL} {_ORDER}) AS previous_action
  FROM actions
), changes AS (
  SELECT * FROM sequenced WHERE previous_action IS NULL OR previous_action != action
), paired AS (
  SELECT
    project, location, cluster, pool, team, accelerator_type, accelerator_count, action,
    `at` AS removed_at,
    LEAD(`at`) OVER ({_POOL} {_ORDER}) AS restored_at
  FROM changes
), removals AS (
  SELECT
    * EXCEPT (action),
    IFNULL(restored_at, GREATEST(CURRENT_TIMESTAMP(), removed_at)) AS removed_until
  FROM paired
  WHERE action = 'remove'
), days AS (
  {utc_days("removals", "removed_at", "removed_until")}
), hours AS (
  SELECT
    *,
    {hours("day_until", "day_from")} AS removed_hours
  FROM days
  WHERE day_until > day_from
)
SELECT
  day, team, project, location, cluster, pool, accelerator_type,
  SUM(removed_hours) AS removed_hours,
  SUM(removed_hours * accelerator_count) AS accelerator_hours_saved,
  COUNT(*) AS intervals,
  LOGICAL_OR(restored_at IS NULL) AS still_removed
FROM hours
GROUP BY day, team, project, location, cluster, pool, accelerator_type"""
