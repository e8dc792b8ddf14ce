SELECT
  test_id, model_name, server, accelerator, users, started, requests, qps, success_qps,
  error_rate, p50_ms, p90_ms, p99_ms, tokens_per_s,
  LAG(test_id) OVER (PARTITION BY model_name, server ORDER BY started) AS previous_test_id,
  SAFE_DIVIDE(qps - LAG(qps) OVER (PARTITION BY model_name, server ORDER BY started), LAG(qps) OVER (PARTITION BY model_name, server ORDER BY started)) AS qps_change,
  SAFE_DIVIDE(success_qps - LAG(success_qps) OVER (PARTITION BY model_name, server ORDER BY started), LAG(success_qps) OVER (PARTITION BY model_name, server ORDER BY started)) AS success_qps_change,
  SAFE_DIVIDE(p50_ms - LAG(p50_ms) OVER (PARTITION BY model_name, server ORDER BY started), LAG(p50_ms) OVER (PARTITION BY model_name, server ORDER BY started)) AS p50_ms_change,
  SAFE_DIVIDE(p99_ms - LAG(p99_ms) OVER (PARTITION BY model_name, server ORDER BY started), LAG(p99_ms) OVER (PARTITION BY model_name, server ORDER BY started)) AS p99_ms_change,
  SAFE_DIVIDE(tokens_per_s - LAG(tokens_per_s) OVER (PARTITION BY model_name, server ORDER BY started), LAG(tokens_per_s) OVER (PARTITION BY model_name, server ORDER BY started)) AS tokens_per_s_change,
  (error_rate - LAG(error_rate) OVER (PARTITION BY model_name, server ORDER BY started)) * 100 AS error_rate_change_pp
FROM `${project_id}.${dataset_id}.test_summary`
WHERE model_count <= 1
