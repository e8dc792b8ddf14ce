/**
 * Resource-level grants of the definition's service accounts: each role is bound
 * on the one topic, table, dataset, bucket or service account it is about, never
 * on the project. Grants of scope "project", "cluster" and "scheduled_clusters"
 * are modules/iam's.
 *
 * Used by modules/functions, modules/services and modules/workload_identity for
 * their own accounts.
 */

locals {
  grants = flatten([
    for principal, p in var.principals : [
      for g in p.grants : merge(g, { principal = principal })
    ]
  ])

  topic_grants = {
    for g in local.grants : "${g.principal}/${g.target}/${g.role}" => g if g.scope == "topic"
  }
  table_grants = {
    for g in local.grants : "${g.principal}/${g.target}/${g.role}" => g if g.scope == "table"
  }
  dataset_grants = {
    for g in local.grants : "${g.principal}/${g.role}" => g if g.scope == "dataset"
  }
  # One binding per (principal, bucket, role): the releases bucket is the models
  # bucket unless one is named, and two resources managing one binding would
  # remove it for both when either goes.
  bucket_keys = {
    releases_bucket = var.releases_bucket == null ? "models_bucket" : "releases_bucket"
  }
  bucket_grants = {
    for key, same in {
      for g in local.grants : "${g.principal}/${lookup(local.bucket_keys, g.scope, g.scope)}/${g.role}" => g...
      if contains(keys(local.buckets), g.scope)
    } : key => same[0]
  }
  # Only when a node service account is configured (slices.node_service_account).
  node_service_account_grants = {
    for g in local.grants : "${g.principal}/${g.role}" => g
    if g.scope == "node_service_account" && var.node_service_account != null
  }
  # The account's own project: a user-managed account's email names it
  # (<id>@<project>.iam.gserviceaccount.com); any other (the Compute Engine default
  # account, <number>-compute@developer...) is taken to be in this project.
  node_service_account_project = try(regex("@([^.@]+)\\.iam\\.gserviceaccount\\.com$", var.node_service_account)[0], var.project_id)

  buckets = {
    config_bucket   = var.config_bucket
    models_bucket   = var.models_bucket
    releases_bucket = coalesce(var.releases_bucket, var.models_bucket)
    sax_bucket      = var.sax_bucket
  }
}

resource "google_pubsub_topic_iam_member" "topic" {
  for_each = local.topic_grants

  project = var.project_id
  topic   = var.topic_ids[each.value.target]
  role    = each.value.role
  member  = var.principals[each.value.principal].member

  lifecycle {
    precondition {
      condition     = contains(keys(var.topic_ids), each.value.target)
      error_message = "${each.value.principal}: grant on topic ${each.value.target}, which is not one of the definition's topics."
    }
  }
}

# Table-level: an account that inserts rows gets write access to those tables only,
# never to the dataset's views. table_id may be the table's full id: the provider
# parses projects/P/datasets/D/tables/T (google/services/bigquery/iam_bigquery_table.go,
# v6.0.0 and v6.50.0).
resource "google_bigquery_table_iam_member" "table" {
  for_each = local.table_grants

  project    = var.project_id
  dataset_id = var.dataset_id
  table_id   = var.table_ids[each.value.target]
  role       = each.value.role
  member     = var.principals[each.value.principal].member

  lifecycle {
    precondition {
      condition     = contains(keys(var.table_ids), each.value.target)
      error_message = "${each.value.principal}: grant on table ${each.value.target}, which is not one of the dataset's tables."
    }
  }
}

resource "google_bigquery_dataset_iam_member" "dataset" {
  for_each = local.dataset_grants

  project    = var.project_id
  dataset_id = var.dataset_id
  role       = each.value.role
  member     = var.principals[each.value.principal].member

  lifecycle {
    precondition {
      condition     = var.dataset_id != null
      error_message = "${each.value.principal}: grant on the metrics dataset, which was not given to this module."
    }
  }
}

resource "google_storage_bucket_iam_member" "bucket" {
  for_each = local.bucket_grants

  bucket = local.buckets[each.value.scope]
  role   = each.value.role
  member = var.principals[each.value.principal].member

  lifecycle {
    precondition {
      condition     = local.buckets[each.value.scope] != null
      error_message = "${each.value.principal}: grant on the ${each.value.scope}, which was not given to this module."
    }
  }
}

resource "google_service_account_iam_member" "node_service_account" {
  for_each = local.node_service_account_grants

  service_account_id = "projects/${local.node_service_account_project}/serviceAccounts/${var.node_service_account}"
  role               = each.value.role
  member             = var.principals[each.value.principal].member
}
