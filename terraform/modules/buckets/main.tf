/**
 * The four buckets accelops uses: the team config (ACCELOPS_CONFIG, versioned so
 * a bad edit can be rolled back), the functions' source archives, the models
 * (uploads under models/, and by default the immutable releases deploy_model
 * copies under releases/), and the Sax cell's state (the Saxml admin server
 * rewrites it: kept apart so that no server identity may delete releases). All
 * private: uniform bucket-level access, public access prevention enforced;
 * access is granted per bucket by the definition's grants.
 */

locals {
  prefix = coalesce(var.name_prefix, "${var.project_id}-accelops")
}

resource "google_storage_bucket" "config" {
  #checkov:skip=CKV_GCP_62:Access is audited with Cloud Audit Logs (data access logs), not with legacy usage-log buckets.
  project                     = var.project_id
  name                        = "${local.prefix}-config"
  location                    = var.location
  storage_class               = "STANDARD"
  uniform_bucket_level_access = true
  public_access_prevention    = "enforced"
  force_destroy               = var.force_destroy
  labels                      = var.labels

  versioning {
    enabled = true
  }

  lifecycle_rule {
    condition {
      days_since_noncurrent_time = var.noncurrent_version_days
      with_state                 = "ARCHIVED"
    }
    action {
      type = "Delete"
    }
  }
}

resource "google_storage_bucket_object" "config" {
  bucket       = google_storage_bucket.config.name
  name         = var.config_object_name
  content      = file(var.config_file)
  content_type = "application/yaml"
}

resource "google_storage_bucket" "source" {
  #checkov:skip=CKV_GCP_62:Access is audited with Cloud Audit Logs (data access logs), not with legacy usage-log buckets.
  project                     = var.project_id
  name                        = "${local.prefix}-function-source"
  location                    = var.location
  storage_class               = "STANDARD"
  uniform_bucket_level_access = true
  public_access_prevention    = "enforced"
  force_destroy               = var.force_destroy
  labels                      = var.labels

  versioning {
    enabled = true
  }

  # Replaced archives are only needed to roll back; drop them after a while.
  lifecycle_rule {
    condition {
      days_since_noncurrent_time = var.noncurrent_version_days
      with_state                 = "ARCHIVED"
    }
    action {
      type = "Delete"
    }
  }

  # Old builds (one archive per release): deleted after source_retention_days.
  dynamic "lifecycle_rule" {
    for_each = var.source_retention_days == null ? [] : [var.source_retention_days]
    content {
      condition {
        age        = lifecycle_rule.value
        with_state = "LIVE"
      }
      action {
        type = "Delete"
      }
    }
  }
}

resource "google_storage_bucket" "models" {
  #checkov:skip=CKV_GCP_62:Access is audited with Cloud Audit Logs (data access logs), not with legacy usage-log buckets.
  project                     = var.project_id
  name                        = "${local.prefix}-models"
  location                    = var.location
  storage_class               = "STANDARD"
  uniform_bucket_level_access = true
  public_access_prevention    = "enforced"
  force_destroy               = var.force_destroy
  labels                      = var.labels

  # An overwritten model can be restored for noncurrent_version_days.
  versioning {
    enabled = true
  }

  lifecycle_rule {
    condition {
      days_since_noncurrent_time = var.noncurrent_version_days
      with_state                 = "ARCHIVED"
    }
    action {
      type = "Delete"
    }
  }
}

# The Sax cell's state: the admin server keeps its address and the published
# models under sax-root/ and sax-fs-root/ (fixed by its image), rewriting them as
# it runs. Only accelops-saxml may write here (the definition's grants).
resource "google_storage_bucket" "sax" {
  #checkov:skip=CKV_GCP_62:Access is audited with Cloud Audit Logs (data access logs), not with legacy usage-log buckets.
  project                     = var.project_id
  name                        = "${local.prefix}-sax"
  location                    = var.location
  storage_class               = "STANDARD"
  uniform_bucket_level_access = true
  public_access_prevention    = "enforced"
  force_destroy               = var.force_destroy
  labels                      = var.labels

  # Every state write leaves a noncurrent version: kept briefly, to recover from
  # a bad write, not for the months the other buckets keep them.
  versioning {
    enabled = true
  }

  lifecycle_rule {
    condition {
      days_since_noncurrent_time = var.sax_noncurrent_version_days
      with_state                 = "ARCHIVED"
    }
    action {
      type = "Delete"
    }
  }
}
