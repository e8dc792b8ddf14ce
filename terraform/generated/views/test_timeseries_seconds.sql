WITH bucketed AS (
  SELECT
    *,
    TIMESTAMP_TRUNC(start_time, SECOND) AS bucket,
    TIMESTAMP_TRUNC(MIN(start_time) OVER (PARTITION BY test_id), SECOND) AS first_bucket
  FROM `${project_id}.${dataset_id}.requests_unique`
)
SELECT
  test_id,
  bucket,
  TIMESTAMP_DIFF(bucket, ANY_VALUE(first_bucket), SECOND) AS offset_s,
  COUNT(*) AS requests,
  COUNTIF(exception IS NOT NULL) AS errors,
  COUNT(*) / 1.0 AS qps,
  APPROX_QUANTILES(IF(exception IS NULL, response_time, NULL), 100)[OFFSET(50)] AS p50_ms,
  APPROX_QUANTILES(IF(exception IS NULL, response_time, NULL), 100)[OFFSET(90)] AS p90_ms,
  APPROX_QUANTILES(IF(exception IS NULL, response_time, NULL), 100)[OFFSET(99)] AS p99_ms,
  IFNULL(SUM(num_output_tokens), 0) / 1.0 AS tokens_per_s
FROM bucketed
GROUP BY test_id, bucket
