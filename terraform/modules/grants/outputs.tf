output "bindings" {
  description = "Every binding made, as \"<scope>:<principal>/<target>/<role>\" keys; for review and tests."
  value = concat(
    [for key in keys(google_pubsub_topic_iam_member.topic) : "topic:${key}"],
    [for key in keys(google_bigquery_table_iam_member.table) : "table:${key}"],
    [for key in keys(google_bigquery_dataset_iam_member.dataset) : "dataset:${key}"],
    [for key in keys(google_storage_bucket_iam_member.bucket) : "bucket:${key}"],
    [for key in keys(google_service_account_iam_member.node_service_account) : "node_service_account:${key}"],
  )
}
