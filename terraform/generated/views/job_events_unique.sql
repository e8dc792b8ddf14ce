SELECT * EXCEPT (_copy) FROM (
  SELECT *, ROW_NUMBER() OVER (PARTITION BY row_key ORDER BY ingested_at) AS _copy
  FROM `${project_id}.${dataset_id}.job_events`
) WHERE _copy = 1
