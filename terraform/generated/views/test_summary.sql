WITH models AS (
  SELECT test_id, model_name,
    ROW_NUMBER() OVER (PARTITION BY test_id ORDER BY COUNT(*) DESC, model_name) AS rank
  FROM `${project_id}.${dataset_id}.requests_unique`
  WHERE model_name IS NOT NULL
  GROUP BY test_id, model_name
), per_test AS (
  SELECT
    test_id,
    ANY_VALUE(server) AS server,
    ANY_VALUE(accelerator) AS accelerator,
    MAX(users) AS users,
    MIN(start_time) AS started,
    MAX(start_time) AS ended,
    COUNT(*) AS requests,
    COUNTIF(exception IS NOT NULL) AS errors,
    APPROX_QUANTILES(IF(exception IS NULL, response_time, NULL), 100)[OFFSET(50)] AS p50_ms,
    APPROX_QUANTILES(IF(exception IS NULL, response_time, NULL), 100)[OFFSET(90)] AS p90_ms,
    APPROX_QUANTILES(IF(exception IS NULL, response_time, NULL), 100)[OFFSET(99)] AS p99_ms,
    IFNULL(SUM(num_input_tokens), 0) AS input_tokens,
    IFNULL(SUM(num_output_tokens), 0) AS output_tokens
  FROM `${project_id}.${dataset_id}.requests_unique`
  GROUP BY test_id
)
SELECT
  per_test.*,
  models.model_name,
  GREATEST(TIMESTAMP_DIFF(ended, started, MILLISECOND) / 1000.0, 1.0) AS duration_s,
  SAFE_DIVIDE(errors, requests) AS error_rate,
  requests / GREATEST(TIMESTAMP_DIFF(ended, started, MILLISECOND) / 1000.0, 1.0) AS qps,
  output_tokens / GREATEST(TIMESTAMP_DIFF(ended, started, MILLISECOND) / 1000.0, 1.0)
    AS tokens_per_s
FROM per_test LEFT JOIN models ON models.test_id = per_test.test_id AND models.rank = 1
