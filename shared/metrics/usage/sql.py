"""The SQL of the job lifecycle views: queue wait, provisioning, run time and chip-hours.

Three views, each reading the one before:

* ``job_events_unique`` — each event id once (the first copy ingested): a transition
  observed again, or a redelivered message, carries the same id;
* ``job_lifecycle`` — one row per request id: what the job was (team, TPU type,
  JobSet, slices and chips, taken from its ``submitted`` event, else from any event
  that names them), when each transition happened, how long it waited in the queue
  (admitted - submitted), provisioned (running - admitted) and ran (finished -
  running), the chip-hours it used (its chips for as long as it ran) and the
  chip-hours its slices were held (each slice's chips from ``slice_ready`` to
  ``slice_deleted``); idle is held minus used, never below zero. A run or a slice
  without its end yet counts up to now, and the row says so (``still_running``);
* ``job_usage_daily`` — per UTC day, team and TPU type; its first columns are a
  contract (team budgets read them). Each job is counted on the day of each of its
  transitions: submitted, rejected, started (``running``), finished and failed
  (finished with outcome ``failed``; a cancelled job did not fail). Each duration is
  averaged on the day it ended: the queue wait on the day of admission, the
  provisioning on the day the job started running, the run on the day it finished, so
  a past day's figures never change. Chip-hours are split at UTC midnights, as
  ``pool_savings_daily`` splits removals: a day counts the part of each run and each
  held slice that falls in it (up to now for those still open), and idle is computed
  per job and day (held minus used, never below zero) before it is summed.

Durations are ``TIMESTAMP_DIFF(..., MICROSECOND)``: BigQuery counts whole units, which
for SECOND or HOUR would drop the remainder of every interval (and the sandbox's
emulator counts unit boundaries instead). Hours are divided before they are
multiplied by chips, in FLOAT64. ``at`` is a reserved keyword in GoogleSQL and is
quoted wherever it is a bare column name. Percentiles are exact (PERCENTILE_CONT,
computed over a window and picked per group), as in :mod:`shared.metrics.schema`.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from shared.metrics.sql_time import hours as _hours
from shared.metrics.sql_time import seconds as _seconds
from shared.metrics.sql_time import utc_days

if TYPE_CHECKING:
    from shared.metrics.names import Names

__all__ = ["JOB_EVENTS_UNIQUE", "JOB_LIFECYCLE", "JOB_USAGE_DAILY", "USAGE_COLUMNS",
           "job_lifecycle", "job_usage_daily"]

JOB_EVENTS_UNIQUE = "job_events_unique"
JOB_LIFECYCLE = "job_lifecycle"
JOB_USAGE_DAILY = "job_usage_daily"
#: The columns of ``job_usage_daily`` others rely on, in order; more may follow.
USAGE_COLUMNS = ("day", "team", "tpu_type", "jobs_submitted", "jobs_rejected", "jobs_started",
                 "jobs_finished", "jobs_failed", "queue_wait_seconds_avg",
                 "provisioning_seconds_avg", "run_seconds_avg", "chip_hours_used",
                 "idle_chip_hours")

# What a job was, from its submitted event; from any event naming it otherwise (a
# request whose submitted event was lost, or a rejected one that never had one).
_DESCRIPTION = ("team", "tpu_type", "jobset", "slices", "chips_per_slice")
# The transitions with one instant per job, and the column each becomes.
_INSTANTS = ("submitted", "rejected", "admitted", "running", "finished")


def _described(field: str) -> str:
    return f"COALESCE(MAX(IF(event = 'submitted', {field}, NULL)), MAX({field})) AS {field}"


def _open_until(end: str, start: str) -> str:
    """``end``, or now while there is none (never before ``start``)."""
    return f"IFNULL({end}, GREATEST(CURRENT_TIMESTAMP(), {start}))"


def _slices(n: Names) -> str:
    """Each slice of each job: when it was ready and deleted, and its chips."""
    return f"""SELECT
    request_id,
    slice_index,
    MIN(IF(event = 'slice_ready', `at`, NULL)) AS ready_at,
    MIN(IF(event = 'slice_deleted', `at`, NULL)) AS deleted_at,
    MAX(chips_per_slice) AS chips_per_slice
  FROM {n.sql(JOB_EVENTS_UNIQUE)}
  WHERE slice_index IS NOT NULL
  GROUP BY request_id, slice_index"""


def _held() -> str:
    """Intervals chips were held: each ready slice of the CTE ``slice_spans``, with the
    team, TPU type and chips of its job from the CTE ``jobs``. (``slices`` is a column
    of ``jobs``: a CTE of that name would be ambiguous in BigQuery.)"""
    return f"""SELECT
    jobs.request_id, jobs.team, jobs.tpu_type,
    slice_spans.ready_at AS from_at,
    {_open_until("slice_spans.deleted_at", "slice_spans.ready_at")} AS until_at,
    IFNULL(slice_spans.chips_per_slice, jobs.chips_per_slice) AS chips,
    slice_spans.deleted_at IS NULL AS still_up
  FROM slice_spans JOIN jobs ON jobs.request_id = slice_spans.request_id
  WHERE slice_spans.ready_at IS NOT NULL"""


def job_lifecycle(n: Names) -> str:
    """One row per job request: what it was, its transitions, durations and chip-hours."""
    description = ",\n    ".join(_described(field) for field in _DESCRIPTION)
    instants = ",\n    ".join(f"MIN(IF(event = '{event}', `at`, NULL)) AS {event}_at"
                              for event in _INSTANTS)
    return f"""WITH jobs AS (
  SELECT
    request_id,
    {description},
    {instants},
    MAX(IF(event = 'finished', outcome, NULL)) AS outcome,
    COALESCE(MAX(IF(event = 'finished', reason, NULL)),
             MAX(IF(event = 'rejected', reason, NULL))) AS reason
  FROM {n.sql(JOB_EVENTS_UNIQUE)}
  GROUP BY request_id
), slice_spans AS (
  {_slices(n)}
), held AS (
  SELECT
    request_id,
    SUM(GREATEST({_hours("until_at", "from_at")}, 0) * chips) AS slice_chip_hours,
    LOGICAL_OR(still_up) AS slice_still_up
  FROM ({_held()})
  GROUP BY request_id
), timed AS (
  SELECT
    jobs.*,
    jobs.slices * jobs.chips_per_slice AS chips,
    {_seconds("admitted_at", "submitted_at")} AS queue_wait_seconds,
    {_seconds("running_at", "admitted_at")} AS provisioning_seconds,
    {_seconds(_open_until("finished_at", "running_at"), "running_at")} AS run_seconds,
    running_at IS NOT NULL AND finished_at IS NULL AS still_running,
    IFNULL(held.slice_chip_hours, 0.0) AS slice_chip_hours,
    IFNULL(held.slice_still_up, FALSE) AS slice_still_up
  FROM jobs LEFT JOIN held ON held.request_id = jobs.request_id
), used AS (
  SELECT
    *,
    IFNULL(GREATEST(run_seconds, 0) / 3600 * chips, 0.0) AS chip_hours_used
  FROM timed
)
SELECT
  request_id, team, tpu_type, jobset, slices, chips_per_slice, chips,
  submitted_at, rejected_at, admitted_at, running_at, finished_at, outcome, reason,
  queue_wait_seconds, provisioning_seconds, run_seconds, still_running,
  chip_hours_used, slice_chip_hours, slice_still_up,
  GREATEST(slice_chip_hours - chip_hours_used, 0.0) AS idle_chip_hours
FROM used"""


# (column, the duration it measures, fraction)
_PERCENTILES = (("queue_wait_seconds_p50", "wait_seconds", 0.5),
                ("queue_wait_seconds_p90", "wait_seconds", 0.9),
                ("provisioning_seconds_p50", "provisioning_seconds", 0.5),
                ("provisioning_seconds_p90", "provisioning_seconds", 0.9))
_GROUP = "day, team, tpu_type"


def _measure(event: str, seconds: str = "CAST(NULL AS FLOAT64)") -> str:
    """A job's transition as a row of its day: which one, and the duration it ended."""
    return f"""SELECT DATE({event}_at) AS day, team, tpu_type, '{event}' AS measure,
    {seconds} AS seconds, outcome, 0.0 AS used_chip_hours, 0.0 AS idle_chip_hours,
    FALSE AS still_open
  FROM jobs WHERE {event}_at IS NOT NULL"""


def job_usage_daily(n: Names) -> str:
    """Per UTC day, team and TPU type: the :data:`USAGE_COLUMNS`; then how many queue
    waits, provisionings and runs each average is over (so averages over several days
    can be weighted exactly), whether a run or slice counted is still open (its
    figures grow until it ends), and the p50 and p90 of queue wait and provisioning."""
    percentiles = ",\n    ".join(
        f"PERCENTILE_CONT({value}, {q}) OVER (PARTITION BY {_GROUP}) AS {column}"
        for column, value, q in _PERCENTILES)
    picked = ",\n  ".join(f"MAX({column}) AS {column}" for column, _, _ in _PERCENTILES)
    return f"""WITH jobs AS (
  SELECT * FROM {n.sql(JOB_LIFECYCLE)}
), slice_spans AS (
  {_slices(n)}
), held AS (
  SELECT
    request_id, team, tpu_type, TRUE AS used, running_at AS from_at,
    {_open_until("finished_at", "running_at")} AS until_at, chips,
    finished_at IS NULL AS still_open
  FROM jobs
  WHERE running_at IS NOT NULL
  UNION ALL
  SELECT request_id, team, tpu_type, FALSE AS used, from_at, until_at, chips,
    still_up AS still_open
  FROM ({_held()})
), days AS (
  {utc_days("held", "from_at", "until_at")}
), job_days AS (
  SELECT
    day, request_id, team, tpu_type,
    SUM(IF(used, chip_hours, 0.0)) AS used_chip_hours,
    SUM(IF(used, 0.0, chip_hours)) AS held_chip_hours,
    LOGICAL_OR(still_open) AS still_open
  FROM (
    SELECT *, {_hours("day_until", "day_from")} * chips AS chip_hours
    FROM days
    WHERE day_until > day_from
  )
  GROUP BY day, request_id, team, tpu_type
), measures AS (
  {_measure("submitted")}
  UNION ALL
  {_measure("rejected")}
  UNION ALL
  {_measure("admitted", "queue_wait_seconds")}
  UNION ALL
  {_measure("running", "provisioning_seconds")}
  UNION ALL
  {_measure("finished", "run_seconds")}
  UNION ALL
  SELECT day, team, tpu_type, 'usage' AS measure, CAST(NULL AS FLOAT64) AS seconds,
    CAST(NULL AS STRING) AS outcome, used_chip_hours,
    GREATEST(held_chip_hours - used_chip_hours, 0.0) AS idle_chip_hours, still_open
  FROM job_days
), durations AS (
  SELECT
    *,
    IF(measure = 'admitted', seconds, NULL) AS wait_seconds,
    IF(measure = 'running', seconds, NULL) AS provisioning_seconds,
    IF(measure = 'finished', seconds, NULL) AS run_seconds
  FROM measures
), with_percentiles AS (
  SELECT *, {percentiles}
  FROM durations
)
SELECT
  {_GROUP},
  COUNTIF(measure = 'submitted') AS jobs_submitted,
  COUNTIF(measure = 'rejected') AS jobs_rejected,
  COUNTIF(measure = 'running') AS jobs_started,
  COUNTIF(measure = 'finished') AS jobs_finished,
  COUNTIF(measure = 'finished' AND outcome = 'failed') AS jobs_failed,
  AVG(wait_seconds) AS queue_wait_seconds_avg,
  AVG(provisioning_seconds) AS provisioning_seconds_avg,
  AVG(run_seconds) AS run_seconds_avg,
  SUM(used_chip_hours) AS chip_hours_used,
  SUM(idle_chip_hours) AS idle_chip_hours,
  COUNT(wait_seconds) AS queue_waits,
  COUNT(provisioning_seconds) AS provisionings,
  COUNT(run_seconds) AS runs,
  LOGICAL_OR(still_open) AS still_open,
  {picked}
FROM with_percentiles
GROUP BY {_GROUP}"""
