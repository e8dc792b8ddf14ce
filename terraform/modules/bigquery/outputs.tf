output "dataset_id" {
  description = "The dataset id."
  value       = google_bigquery_dataset.dataset.dataset_id
}

output "dataset" {
  description = "The dataset's full id (projects/<project>/datasets/<id>)."
  value       = google_bigquery_dataset.dataset.id
}

output "table_ids" {
  description = "Table id (projects/<project>/datasets/<dataset>/tables/<name>) by table name."
  value       = { for name, t in google_bigquery_table.table : name => t.id }
}

output "view_ids" {
  description = "View id by view name."
  value = merge(
    { for name, t in google_bigquery_table.view_level_0 : name => t.id },
    { for name, t in google_bigquery_table.view_level_1 : name => t.id },
    { for name, t in google_bigquery_table.view_level_2 : name => t.id },
    { for name, t in google_bigquery_table.view_level_3 : name => t.id },
  )
}

output "view_levels" {
  description = "The level each view is created at (0 after the tables, n after level n-1)."
  value       = module.view_order.levels
}
