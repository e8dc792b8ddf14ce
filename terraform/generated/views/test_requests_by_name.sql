WITH with_percentiles AS (
  SELECT *, PERCENTILE_CONT(ok_ms, 0.5) OVER (PARTITION BY test_id, request_type, request_name) AS p50_ms,
    PERCENTILE_CONT(ok_ms, 0.9) OVER (PARTITION BY test_id, request_type, request_name) AS p90_ms,
    PERCENTILE_CONT(ok_ms, 0.99) OVER (PARTITION BY test_id, request_type, request_name) AS p99_ms
  FROM (SELECT
    *,
    IF(exception IS NULL, response_time, NULL) AS ok_ms,
    IF(exception IS NULL, time_to_first_token, NULL) AS ttft_ms,
    IF(exception IS NULL, time_per_output_token, NULL) AS tpot_ms,
    TIMESTAMP_ADD(start_time, INTERVAL CAST(response_time * 1000 AS INT64) MICROSECOND)
      AS end_time
  FROM `${project_id}.${dataset_id}.requests_unique`)
)
SELECT
  test_id,
  request_type,
  request_name,
  COUNT(*) AS requests,
  COUNTIF(exception IS NOT NULL) AS failures,
    ANY_VALUE(p50_ms) AS p50_ms,
    ANY_VALUE(p90_ms) AS p90_ms,
    ANY_VALUE(p99_ms) AS p99_ms,
  MAX(ok_ms) AS max_ms,
  AVG(ok_ms) AS mean_ms,
  AVG(response_length) AS mean_bytes,
  IFNULL(SUM(num_output_tokens), 0) AS output_tokens
FROM with_percentiles
GROUP BY test_id, request_type, request_name
