WITH unique_runs AS (
SELECT * EXCEPT (_copy) FROM (
  SELECT *, ROW_NUMBER() OVER (PARTITION BY row_key ORDER BY ingested_at) AS _copy
  FROM `${project_id}.${dataset_id}.test_runs`
) WHERE _copy = 1
), starts AS (
  SELECT * FROM unique_runs WHERE phase = 'start'
), stops AS (
  SELECT * FROM unique_runs WHERE phase = 'stop'
)
SELECT
  COALESCE(starts.test_id, stops.test_id) AS test_id,
  COALESCE(starts.model_name, stops.model_name) AS model_name,
  COALESCE(starts.server, stops.server) AS server,
  COALESCE(starts.accelerator, stops.accelerator) AS accelerator,
  COALESCE(starts.users, stops.users) AS users,
  COALESCE(starts.spawn_rate, stops.spawn_rate) AS spawn_rate,
  COALESCE(starts.run_time_s, stops.run_time_s) AS run_time_s,
  COALESCE(starts.locust_version, stops.locust_version) AS locust_version,
  COALESCE(starts.loadgen_revision, stops.loadgen_revision) AS loadgen_revision,
  COALESCE(starts.host, stops.host) AS host,
  COALESCE(starts.slo_ttft_ms, stops.slo_ttft_ms) AS slo_ttft_ms,
  COALESCE(starts.slo_tpot_ms, stops.slo_tpot_ms) AS slo_tpot_ms,
  COALESCE(starts.slo_latency_ms, stops.slo_latency_ms) AS slo_latency_ms,
  starts.at AS run_started,
  stops.at AS run_stopped
FROM starts FULL OUTER JOIN stops ON starts.test_id = stops.test_id
