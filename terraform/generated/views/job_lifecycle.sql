WITH jobs AS (
  SELECT
    request_id,
    COALESCE(MAX(IF(event = 'submitted', team, NULL)), MAX(team)) AS team,
    COALESCE(MAX(IF(event = 'submitted', tpu_type, NULL)), MAX(tpu_type)) AS tpu_type,
    COALESCE(MAX(IF(event = 'submitted', jobset, NULL)), MAX(jobset)) AS jobset,
    COALESCE(MAX(IF(event = 'submitted', slices, NULL)), MAX(slices)) AS slices,
    COALESCE(MAX(IF(event = 'submitted', chips_per_slice, NULL)), MAX(chips_per_slice)) AS chips_per_slice,
    MIN(IF(event = 'submitted', `at`, NULL)) AS submitted_at,
    MIN(IF(event = 'rejected', `at`, NULL)) AS rejected_at,
    MIN(IF(event = 'admitted', `at`, NULL)) AS admitted_at,
    MIN(IF(event = 'running', `at`, NULL)) AS running_at,
    MIN(IF(event = 'finished', `at`, NULL)) AS finished_at,
    MAX(IF(event = 'finished', outcome, NULL)) AS outcome,
    COALESCE(MAX(IF(event = 'finished', reason, NULL)),
             MAX(IF(event = 'rejected', reason, NULL))) AS reason
  FROM `${project_id}.${dataset_id}.job_events_unique`
  GROUP BY request_id
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
    request_id,
    SUM(GREATEST(TIMESTAMP_DIFF(until_at, from_at, MICROSECOND) / 3600000000, 0) * chips) AS slice_chip_hours,
    LOGICAL_OR(still_up) AS slice_still_up
  FROM (SELECT
    jobs.request_id, jobs.team, jobs.tpu_type,
    slice_spans.ready_at AS from_at,
    IFNULL(slice_spans.deleted_at, GREATEST(CURRENT_TIMESTAMP(), slice_spans.ready_at)) AS until_at,
    IFNULL(slice_spans.chips_per_slice, jobs.chips_per_slice) AS chips,
    slice_spans.deleted_at IS NULL AS still_up
  FROM slice_spans JOIN jobs ON jobs.request_id = slice_spans.request_id
  WHERE slice_spans.ready_at IS NOT NULL)
  GROUP BY request_id
), timed AS (
  SELECT
    jobs.*,
    jobs.slices * jobs.chips_per_slice AS chips,
    TIMESTAMP_DIFF(admitted_at, submitted_at, MICROSECOND) / 1000000 AS queue_wait_seconds,
    TIMESTAMP_DIFF(running_at, admitted_at, MICROSECOND) / 1000000 AS provisioning_seconds,
    TIMESTAMP_DIFF(IFNULL(finished_at, GREATEST(CURRENT_TIMESTAMP(), running_at)), running_at, MICROSECOND) / 1000000 AS run_seconds,
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
FROM used
