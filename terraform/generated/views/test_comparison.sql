SELECT
  test_id, model_name, server, accelerator, users, started, requests, qps, error_rate,
  p50_ms, p90_ms, p99_ms, tokens_per_s,
  LAG(test_id) OVER (PARTITION BY model_name, server ORDER BY started) AS previous_test_id,
  SAFE_DIVIDE(qps - LAG(qps) OVER (PARTITION BY model_name, server ORDER BY started), LAG(qps) OVER (PARTITION BY model_name, server ORDER BY started)) AS qps_change,
  SAFE_DIVIDE(p50_ms - LAG(p50_ms) OVER (PARTITION BY model_name, server ORDER BY started), LAG(p50_ms) OVER (PARTITION BY model_name, server ORDER BY started)) AS p50_ms_change,
  SAFE_DIVIDE(p99_ms - LAG(p99_ms) OVER (PARTITION BY model_name, server ORDER BY started), LAG(p99_ms) OVER (PARTITION BY model_name, server ORDER BY started)) AS p99_ms_change,
  SAFE_DIVIDE(tokens_per_s - LAG(tokens_per_s) OVER (PARTITION BY model_name, server ORDER BY started), LAG(tokens_per_s) OVER (PARTITION BY model_name, server ORDER BY started)) AS tokens_per_s_change,
  error_rate - LAG(error_rate) OVER (PARTITION BY model_name, server ORDER BY started)
    AS error_rate_delta
FROM `${project_id}.${dataset_id}.test_summary`
