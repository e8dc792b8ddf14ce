SELECT
  test_id,
  request_type,
  request_name,
  exception AS message,
  COUNT(*) AS occurrences,
  MIN(start_time) AS first_seen,
  MAX(start_time) AS last_seen
FROM `${project_id}.${dataset_id}.requests_unique`
WHERE exception IS NOT NULL
GROUP BY test_id, request_type, request_name, exception
