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
), with_percentiles AS (
  SELECT *, PERCENTILE_CONT(ok_ms, 0.5) OVER (PARTITION BY test_id) AS p50_ms,
    PERCENTILE_CONT(ok_ms, 0.9) OVER (PARTITION BY test_id) AS p90_ms,
    PERCENTILE_CONT(ok_ms, 0.99) OVER (PARTITION BY test_id) AS p99_ms,
    PERCENTILE_CONT(ttft_ms, 0.5) OVER (PARTITION BY test_id) AS ttft_p50_ms,
    PERCENTILE_CONT(ttft_ms, 0.9) OVER (PARTITION BY test_id) AS ttft_p90_ms,
    PERCENTILE_CONT(ttft_ms, 0.99) OVER (PARTITION BY test_id) AS ttft_p99_ms,
    PERCENTILE_CONT(tpot_ms, 0.5) OVER (PARTITION BY test_id) AS tpot_p50_ms,
    PERCENTILE_CONT(tpot_ms, 0.9) OVER (PARTITION BY test_id) AS tpot_p90_ms,
    PERCENTILE_CONT(tpot_ms, 0.99) OVER (PARTITION BY test_id) AS tpot_p99_ms
  FROM measured
), gaps AS (
  -- Every gap between two tokens of a successful streamed request, as its own row.
  SELECT measured.test_id, gap,
    PERCENTILE_CONT(gap, 0.5) OVER (PARTITION BY measured.test_id) AS itl_p50_ms,
    PERCENTILE_CONT(gap, 0.9) OVER (PARTITION BY measured.test_id) AS itl_p90_ms,
    PERCENTILE_CONT(gap, 0.99) OVER (PARTITION BY measured.test_id) AS itl_p99_ms
  FROM measured, UNNEST(measured.inter_token_latencies) AS gap
  WHERE measured.exception IS NULL
), itl AS (
  SELECT test_id, ANY_VALUE(itl_p50_ms) AS itl_p50_ms,
    ANY_VALUE(itl_p90_ms) AS itl_p90_ms,
    ANY_VALUE(itl_p99_ms) AS itl_p99_ms, AVG(gap) AS itl_mean_ms, COUNT(*) AS itl_gaps
  FROM gaps
  GROUP BY test_id
), request_models AS (
  SELECT test_id, model_name, COUNT(*) AS requests,
    ROW_NUMBER() OVER (PARTITION BY test_id ORDER BY COUNT(*) DESC, model_name) AS rank
  FROM measured
  WHERE model_name IS NOT NULL
  GROUP BY test_id, model_name
), model_sets AS (
  SELECT test_id, COUNT(*) AS model_count,
    STRING_AGG(model_name, ', ' ORDER BY requests DESC, model_name) AS models_seen
  FROM request_models
  GROUP BY test_id
), per_test AS (
  SELECT
    test_id,
    ANY_VALUE(server) AS request_server,
    ANY_VALUE(accelerator) AS request_accelerator,
    MAX(users) AS max_users,
    MIN(start_time) AS first_request,
    MAX(end_time) AS last_response,
    COUNT(*) AS requests,
    COUNTIF(exception IS NOT NULL) AS errors,
    IF(LOGICAL_OR(slo_given), COUNTIF(good), NULL) AS good_requests,
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
    AVG(ok_ms) AS mean_ms,
    IFNULL(SUM(num_input_tokens), 0) AS input_tokens,
    IFNULL(SUM(num_output_tokens), 0) AS output_tokens
  FROM with_percentiles
  GROUP BY test_id
), timed AS (
  SELECT
    per_test.*,
    runs.* EXCEPT (test_id, model_name, server, accelerator, users),
    COALESCE(runs.model_name, request_models.model_name) AS model_name,
    runs.model_name IS NULL AS model_inferred,
    IFNULL(model_sets.model_count, 0) AS model_count,
    model_sets.models_seen,
    COALESCE(runs.server, per_test.request_server) AS server,
    COALESCE(runs.accelerator, per_test.request_accelerator) AS accelerator,
    COALESCE(runs.users, per_test.max_users) AS users,
    COALESCE(runs.run_started, per_test.first_request) AS started,
    COALESCE(runs.run_stopped, per_test.last_response) AS ended,
    runs.run_stopped IS NOT NULL AS finished,
    itl.* EXCEPT (test_id)
  FROM per_test
  LEFT JOIN `${project_id}.${dataset_id}.test_runs_unique` AS runs ON runs.test_id = per_test.test_id
  LEFT JOIN itl ON itl.test_id = per_test.test_id
  LEFT JOIN request_models
    ON request_models.test_id = per_test.test_id AND request_models.rank = 1
  LEFT JOIN model_sets ON model_sets.test_id = per_test.test_id
)
SELECT
  * EXCEPT (request_server, request_accelerator),
  GREATEST(TIMESTAMP_DIFF(ended, started, MILLISECOND) / 1000.0, 1.0) AS duration_s,
  SAFE_DIVIDE(errors, requests) AS error_rate,
  requests / GREATEST(TIMESTAMP_DIFF(ended, started, MILLISECOND) / 1000.0, 1.0) AS qps,
  (requests - errors) / GREATEST(TIMESTAMP_DIFF(ended, started, MILLISECOND) / 1000.0, 1.0)
    AS success_qps,
  SAFE_DIVIDE(good_requests, requests) AS goodput,
  good_requests / GREATEST(TIMESTAMP_DIFF(ended, started, MILLISECOND) / 1000.0, 1.0)
    AS goodput_qps,
  output_tokens / GREATEST(TIMESTAMP_DIFF(ended, started, MILLISECOND) / 1000.0, 1.0)
    AS tokens_per_s
FROM timed
