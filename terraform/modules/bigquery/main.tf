/**
 * The metrics dataset: tables from the generated JSON schemas, views from the
 * generated SQL templates, and nothing granted on it here (the principals'
 * dataset-level grants are bound by modules/functions and modules/services).
 *
 * Real BigQuery refuses a view whose source does not exist yet, so views are
 * created in levels (modules/bigquery_view_order): level 0 after the tables,
 * each further level after the one before.
 */

locals {
  views = {
    for v in var.views : v.name => {
      description = v.description
      query = templatefile("${var.generated_dir}/${v.query_file}", {
        project_id = var.project_id
        dataset_id = var.dataset_id
      })
    }
  }

  # Milliseconds in a day, for partition expiration.
  day_ms = 24 * 60 * 60 * 1000
}

module "view_order" {
  source = "../bigquery_view_order"

  # The raw template is enough to see which views a view reads, and is known at plan.
  views = [for v in var.views : { name = v.name, query = file("${var.generated_dir}/${v.query_file}") }]
}

resource "google_bigquery_dataset" "dataset" {
  #checkov:skip=CKV_GCP_81:Google-managed encryption; a customer-managed key is optional (var.kms_key_name) and needs a key ring this module does not own.
  project                    = var.project_id
  dataset_id                 = var.dataset_id
  location                   = var.location
  description                = var.description
  delete_contents_on_destroy = false
  labels                     = var.labels

  dynamic "default_encryption_configuration" {
    for_each = var.kms_key_name == null ? [] : [var.kms_key_name]
    content {
      kms_key_name = default_encryption_configuration.value
    }
  }
}

resource "google_bigquery_table" "table" {
  #checkov:skip=CKV_GCP_80:Google-managed encryption; a customer-managed key is optional (var.kms_key_name, inherited from the dataset default) and needs a key ring this module does not own.
  for_each = var.tables

  project             = var.project_id
  dataset_id          = google_bigquery_dataset.dataset.dataset_id
  table_id            = each.key
  description         = each.value.description
  schema              = file("${var.generated_dir}/${each.value.schema_file}")
  clustering          = length(each.value.clustering) > 0 ? each.value.clustering : null
  deletion_protection = var.deletion_protection
  labels              = var.labels

  time_partitioning {
    type          = "DAY"
    field         = each.value.partition_field
    expiration_ms = each.value.expires && var.partition_expiration_days != null ? var.partition_expiration_days * local.day_ms : null
  }
}

# A view holds no data: no deletion protection, so a changed query can replace it.
resource "google_bigquery_table" "view_level_0" {
  #checkov:skip=CKV_GCP_80:A view stores no data to encrypt.
  #checkov:skip=CKV_GCP_121:A view stores no data; it is replaced when its creation level changes and removed when the definition drops it.
  for_each = { for name, v in local.views : name => v if module.view_order.levels[name] == 0 }

  project             = var.project_id
  dataset_id          = google_bigquery_dataset.dataset.dataset_id
  table_id            = each.key
  description         = each.value.description
  deletion_protection = false
  labels              = var.labels

  view {
    query          = each.value.query
    use_legacy_sql = false
  }

  depends_on = [google_bigquery_table.table]
}

resource "google_bigquery_table" "view_level_1" {
  #checkov:skip=CKV_GCP_80:A view stores no data to encrypt.
  #checkov:skip=CKV_GCP_121:A view stores no data; it is replaced when its creation level changes and removed when the definition drops it.
  for_each = { for name, v in local.views : name => v if module.view_order.levels[name] == 1 }

  project             = var.project_id
  dataset_id          = google_bigquery_dataset.dataset.dataset_id
  table_id            = each.key
  description         = each.value.description
  deletion_protection = false
  labels              = var.labels

  view {
    query          = each.value.query
    use_legacy_sql = false
  }

  depends_on = [google_bigquery_table.view_level_0]
}

resource "google_bigquery_table" "view_level_2" {
  #checkov:skip=CKV_GCP_80:A view stores no data to encrypt.
  #checkov:skip=CKV_GCP_121:A view stores no data; it is replaced when its creation level changes and removed when the definition drops it.
  for_each = { for name, v in local.views : name => v if module.view_order.levels[name] == 2 }

  project             = var.project_id
  dataset_id          = google_bigquery_dataset.dataset.dataset_id
  table_id            = each.key
  description         = each.value.description
  deletion_protection = false
  labels              = var.labels

  view {
    query          = each.value.query
    use_legacy_sql = false
  }

  depends_on = [google_bigquery_table.view_level_1]
}

resource "google_bigquery_table" "view_level_3" {
  #checkov:skip=CKV_GCP_80:A view stores no data to encrypt.
  #checkov:skip=CKV_GCP_121:A view stores no data; it is replaced when its creation level changes and removed when the definition drops it.
  for_each = { for name, v in local.views : name => v if module.view_order.levels[name] == 3 }

  project             = var.project_id
  dataset_id          = google_bigquery_dataset.dataset.dataset_id
  table_id            = each.key
  description         = each.value.description
  deletion_protection = false
  labels              = var.labels

  view {
    query          = each.value.query
    use_legacy_sql = false
  }

  depends_on = [google_bigquery_table.view_level_2]
}
