WITH measured AS (
  SELECT
    measured.*,
    slos.slo_given,
    slos.slo_given AND measured.exception IS NULL
      AND (slos.slo_latency_ms IS NULL OR measured.response_time <= slos.slo_latency_ms)
      AND (slos.slo_ttft_ms IS NULL
           OR IFNULL(measured.time_to_first_token <= slos.slo_ttft_ms, FALSE))
      AND (slos.slo_tpot_ms IS NULL
           OR (measured.time_to_first_token IS NOT NULL
               AND IFNULL(measured.time_per_output_token <= slos.slo_tpot_ms,
                          IFNULL(measured.num_output_tokens < 2, FALSE))))
      AS good
  FROM (SELECT
    *,
    IF(exception IS NULL, response_time, NULL) AS ok_ms,
    IF(exception IS NULL, time_to_first_token, NULL) AS ttft_ms,
    IF(exception IS NULL, time_per_output_token, NULL) AS tpot_ms,
    TIMESTAMP_ADD(start_time, INTERVAL CAST(response_time * 1000 AS INT64) MICROSECOND)
      AS end_time
  FROM `${project_id}.${dataset_id}.requests_unique`) AS measured
  LEFT JOIN (
    SELECT test_id, slo_ttft_ms, slo_tpot_ms, slo_latency_ms,
      slo_ttft_ms IS NOT NULL OR slo_tpot_ms IS NOT NULL OR slo_latency_ms IS NOT NULL
        AS slo_given
    FROM `${project_id}.${dataset_id}.test_runs_unique`
  ) AS slos ON slos.test_id = measured.test_id
), bucketed AS (
  SELECT
    *,
    TIMESTAMP_TRUNC(start_time, SECOND) AS bucket,
    TIMESTAMP_TRUNC(MIN(start_time) OVER (PARTITION BY test_id), SECOND) AS first_bucket,
    TIMESTAMP_TRUNC(MAX(start_time) OVER (PARTITION BY test_id), SECOND) AS last_bucket
  FROM measured
), with_percentiles AS (
  SELECT *, PERCENTILE_CONT(ok_ms, 0.5) OVER (PARTITION BY test_id, bucket) AS p50_ms,
    PERCENTILE_CONT(ok_ms, 0.9) OVER (PARTITION BY test_id, bucket) AS p90_ms,
    PERCENTILE_CONT(ok_ms, 0.99) OVER (PARTITION BY test_id, bucket) AS p99_ms,
    PERCENTILE_CONT(ttft_ms, 0.5) OVER (PARTITION BY test_id, bucket) AS ttft_p50_ms,
    PERCENTILE_CONT(ttft_ms, 0.9) OVER (PARTITION BY test_id, bucket) AS ttft_p90_ms,
    PERCENTILE_CONT(ttft_ms, 0.99) OVER (PARTITION BY test_id, bucket) AS ttft_p99_ms,
    PERCENTILE_CONT(tpot_ms, 0.5) OVER (PARTITION BY test_id, bucket) AS tpot_p50_ms,
    PERCENTILE_CONT(tpot_ms, 0.9) OVER (PARTITION BY test_id, bucket) AS tpot_p90_ms,
    PERCENTILE_CONT(tpot_ms, 0.99) OVER (PARTITION BY test_id, bucket) AS tpot_p99_ms
  FROM bucketed
), users_per_bucket AS (
  -- Each worker's peak in the bucket, added up: a record carries its own
  -- process's user count; NULL workers (one process) make one group.
  SELECT test_id, bucket, SUM(peak) AS users
  FROM (SELECT test_id, bucket, worker, MAX(users) AS peak
        FROM bucketed GROUP BY test_id, bucket, worker)
  GROUP BY test_id, bucket
), per_bucket AS (
SELECT
  test_id,
  bucket,
  TIMESTAMP_DIFF(bucket, ANY_VALUE(first_bucket), SECOND) AS offset_s,
  bucket = ANY_VALUE(first_bucket) OR bucket = ANY_VALUE(last_bucket) AS partial,
  COUNT(*) AS requests,
  COUNTIF(exception IS NOT NULL) AS errors,
  COUNT(*) / 1.0 AS qps,
  COUNTIF(exception IS NULL) / 1.0 AS success_qps,
  IF(LOGICAL_OR(slo_given), COUNTIF(good), NULL) / 1.0 AS goodput_qps,
    ANY_VALUE(p50_ms) AS p50_ms,
    ANY_VALUE(p90_ms) AS p90_ms,
    ANY_VALUE(p99_ms) AS p99_ms,
    ANY_VALUE(ttft_p50_ms) AS ttft_p50_ms,
    ANY_VALUE(ttft_p90_ms) AS ttft_p90_ms,
    ANY_VALUE(ttft_p99_ms) AS ttft_p99_ms,
    ANY_VALUE(tpot_p50_ms) AS tpot_p50_ms,
    ANY_VALUE(tpot_p90_ms) AS tpot_p90_ms,
    ANY_VALUE(tpot_p99_ms) AS tpot_p99_ms,
  MAX(ok_ms) AS max_ms,
  IFNULL(SUM(num_output_tokens), 0) / 1.0 AS tokens_per_s
FROM with_percentiles
GROUP BY test_id, bucket
)
SELECT per_bucket.*, users_per_bucket.users
FROM per_bucket JOIN users_per_bucket USING (test_id, bucket)
