WITH actions AS (
  SELECT * FROM `${project_id}.${dataset_id}.pool_actions_unique` WHERE action IN ('remove', 'restore')
), sequenced AS (
  SELECT *, LAG(action) OVER (PARTITION BY project, location, cluster, pool ORDER BY `at`, IF(action = 'remove', 0, 1), row_key) AS previous_action
  FROM actions
), changes AS (
  SELECT * FROM sequenced WHERE previous_action IS NULL OR previous_action != action
), paired AS (
  SELECT
    project, location, cluster, pool, team, accelerator_type, accelerator_count, action,
    `at` AS removed_at,
    LEAD(`at`) OVER (PARTITION BY project, location, cluster, pool ORDER BY `at`, IF(action = 'remove', 0, 1), row_key) AS restored_at
  FROM changes
), removals AS (
  SELECT
    * EXCEPT (action),
    IFNULL(restored_at, GREATEST(CURRENT_TIMESTAMP(), removed_at)) AS removed_until
  FROM paired
  WHERE action = 'remove'
), days AS (
  SELECT
    removals.*,
    day,
    GREATEST(removed_at, TIMESTAMP(day)) AS day_from,
    LEAST(removed_until, TIMESTAMP_ADD(TIMESTAMP(day), INTERVAL 1 DAY)) AS day_until
  FROM removals, UNNEST(GENERATE_DATE_ARRAY(DATE(removed_at), DATE(removed_until))) AS day
), hours AS (
  SELECT
    *,
    TIMESTAMP_DIFF(day_until, day_from, MICROSECOND) / 3600000000 AS removed_hours
  FROM days
  WHERE day_until > day_from
)
SELECT
  day, team, project, location, cluster, pool, accelerator_type,
  SUM(removed_hours) AS removed_hours,
  SUM(removed_hours * accelerator_count) AS accelerator_hours_saved,
  COUNT(*) AS intervals,
  LOGICAL_OR(restored_at IS NULL) AS still_removed
FROM hours
GROUP BY day, team, project, location, cluster, pool, accelerator_type
