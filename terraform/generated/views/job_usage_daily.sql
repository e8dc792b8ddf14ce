WITH jobs AS (
  SELECT * FROM `${project_id}.${dataset_id}.job_lifecycle`
), slice_spans AS (
  SELECT
    request_id,
    slice_index,
    MIN(IF(event = 'slice_ready', `at`, NULL)) AS ready_at,
    MIN(IF(event = 'slice_deleted', `at`, NULL)) AS deleted_at,
    MAX(chips_per_slice) AS chips_per_slice
  FROM `${project_id}.${dataset_id}.job_events_unique`
  WHERE slice_index IS NOT NULL
  GROUP BY request_id, slice_index
), held AS (
  SELECT
    request_id, team, tpu_type, TRUE AS used, running_at AS from_at,
    IFNULL(finished_at, GREATEST(CURRENT_TIMESTAMP(), running_at)) AS until_at, chips,
    finished_at IS NULL AS still_open
  FROM jobs
  WHERE running_at IS NOT NULL
  UNION ALL
  SELECT request_id, team, tpu_type, FALSE AS used, from_at, until_at, chips,
    still_up AS still_open
  FROM (SELECT
    jobs.request_id, jobs.team, jobs.tpu_type,
    slice_spans.ready_at AS from_at,
    IFNULL(slice_spans.deleted_at, GREATEST(CURRENT_TIMESTAMP(), slice_spans.ready_at)) AS until_at,
    IFNULL(slice_spans.chips_per_slice, jobs.chips_per_slice) AS chips,
    slice_spans.deleted_at IS NULL AS still_up
  FROM slice_spans JOIN jobs ON jobs.request_id = slice_spans.request_id
  WHERE slice_spans.ready_at IS NOT NULL)
), days AS (
  SELECT
    held.*,
    day,
    GREATEST(from_at, TIMESTAMP(day)) AS day_from,
    LEAST(until_at, TIMESTAMP_ADD(TIMESTAMP(day), INTERVAL 1 DAY)) AS day_until
  FROM held, UNNEST(GENERATE_DATE_ARRAY(DATE(from_at), DATE(until_at))) AS day
), job_days AS (
  SELECT
    day, request_id, team, tpu_type,
    SUM(IF(used, chip_hours, 0.0)) AS used_chip_hours,
    SUM(IF(used, 0.0, chip_hours)) AS held_chip_hours,
    LOGICAL_OR(still_open) AS still_open
  FROM (
    SELECT *, TIMESTAMP_DIFF(day_until, day_from, MICROSECOND) / 3600000000 * chips AS chip_hours
    FROM days
    WHERE day_until > day_from
  )
  GROUP BY day, request_id, team, tpu_type
), measures AS (
  SELECT DATE(submitted_at) AS day, team, tpu_type, 'submitted' AS measure,
    CAST(NULL AS FLOAT64) AS seconds, outcome, 0.0 AS used_chip_hours, 0.0 AS idle_chip_hours,
    FALSE AS still_open
  FROM jobs WHERE submitted_at IS NOT NULL
  UNION ALL
  SELECT DATE(rejected_at) AS day, team, tpu_type, 'rejected' AS measure,
    CAST(NULL AS FLOAT64) AS seconds, outcome, 0.0 AS used_chip_hours, 0.0 AS idle_chip_hours,
    FALSE AS still_open
  FROM jobs WHERE rejected_at IS NOT NULL
  UNION ALL
  SELECT DATE(admitted_at) AS day, team, tpu_type, 'admitted' AS measure,
    queue_wait_seconds AS seconds, outcome, 0.0 AS used_chip_hours, 0.0 AS idle_chip_hours,
    FALSE AS still_open
  FROM jobs WHERE admitted_at IS NOT NULL
  UNION ALL
  SELECT DATE(running_at) AS day, team, tpu_type, 'running' AS measure,
    provisioning_seconds AS seconds, outcome, 0.0 AS used_chip_hours, 0.0 AS idle_chip_hours,
    FALSE AS still_open
  FROM jobs WHERE running_at IS NOT NULL
  UNION ALL
  SELECT DATE(finished_at) AS day, team, tpu_type, 'finished' AS measure,
    run_seconds AS seconds, outcome, 0.0 AS used_chip_hours, 0.0 AS idle_chip_hours,
    FALSE AS still_open
  FROM jobs WHERE finished_at IS NOT NULL
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
  SELECT *, PERCENTILE_CONT(wait_seconds, 0.5) OVER (PARTITION BY day, team, tpu_type) AS queue_wait_seconds_p50,
    PERCENTILE_CONT(wait_seconds, 0.9) OVER (PARTITION BY day, team, tpu_type) AS queue_wait_seconds_p90,
    PERCENTILE_CONT(provisioning_seconds, 0.5) OVER (PARTITION BY day, team, tpu_type) AS provisioning_seconds_p50,
    PERCENTILE_CONT(provisioning_seconds, 0.9) OVER (PARTITION BY day, team, tpu_type) AS provisioning_seconds_p90
  FROM durations
)
SELECT
  day, team, tpu_type,
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
  MAX(queue_wait_seconds_p50) AS queue_wait_seconds_p50,
  MAX(queue_wait_seconds_p90) AS queue_wait_seconds_p90,
  MAX(provisioning_seconds_p50) AS provisioning_seconds_p50,
  MAX(provisioning_seconds_p90) AS provisioning_seconds_p90
FROM with_percentiles
GROUP BY day, team, tpu_type
