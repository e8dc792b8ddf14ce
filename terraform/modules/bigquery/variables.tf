variable "project_id" {
  type        = string
  description = "The project of the dataset (also fills the view templates' project_id)."
}

variable "location" {
  type        = string
  description = "Location of the dataset."
  default     = "US"
}

variable "dataset_id" {
  type        = string
  description = "The dataset: system.json `bigquery.dataset_id`."
}

variable "description" {
  type        = string
  description = "Description of the dataset."
  default     = "accelops load-test metrics (tables and views generated from shared/metrics/schema.py)"
}

variable "tables" {
  type = map(object({
    schema_file     = string
    partition_field = string
    clustering      = list(string)
    expires         = bool
    description     = string
  }))
  description = "Tables by name: system.json `bigquery.tables` (schema files relative to generated_dir)."
}

variable "views" {
  type = list(object({
    name        = string
    query_file  = string
    description = string
  }))
  description = "Views: system.json `bigquery.views` (SQL templates relative to generated_dir)."
}

variable "generated_dir" {
  type        = string
  description = "Directory of the generated files (terraform/generated) the schema and query files are read from."
}

variable "partition_expiration_days" {
  type        = number
  description = "Days after which partitions of tables marked `expires` are dropped; null keeps them forever."
  default     = null

  validation {
    condition     = var.partition_expiration_days == null || try(var.partition_expiration_days >= 1, false)
    error_message = "partition_expiration_days must be at least 1, or null."
  }
}

variable "deletion_protection" {
  type        = bool
  description = "Refuse to destroy the tables (their rows are the metrics)."
  default     = true
}

variable "kms_key_name" {
  type        = string
  description = "Cloud KMS key for the dataset's default encryption; null for Google-managed encryption."
  default     = null
}

variable "labels" {
  type        = map(string)
  description = "Labels for the dataset, tables and views."
  default     = {}
}
