variable "project_id" {
  type        = string
  description = "The project of the topics, dataset and service accounts granted on."
}

variable "principals" {
  type = map(object({
    member = string
    grants = list(object({
      role   = string
      scope  = string
      why    = string
      target = string
    }))
  }))
  description = "By function or service name: its IAM member and its grants as system.json lists them."

  validation {
    # An unknown scope would otherwise be bound nowhere, silently.
    condition = alltrue(flatten([
      for p in values(var.principals) : [
        for g in p.grants : contains(["project", "cluster", "scheduled_clusters", "topic", "table", "dataset", "config_bucket", "models_bucket", "releases_bucket", "sax_bucket", "node_service_account"], g.scope)
      ]
    ]))
    error_message = "A grant has a scope this module does not know; bind it here (or in modules/iam for project scope) before deploying."
  }
}

variable "topic_ids" {
  type        = map(string)
  description = "Topic id (projects/<project>/topics/<name>) by topic name, for grants of scope \"topic\"."
  default     = {}
}

variable "table_ids" {
  type        = map(string)
  description = "Table id by table name in the metrics dataset (modules/bigquery `table_ids`), for grants of scope \"table\"."
  default     = {}
}

variable "dataset_id" {
  type        = string
  description = "The metrics dataset, for grants of scope \"dataset\" and \"table\"; null when none of the accounts has one."
  default     = null
}

variable "config_bucket" {
  type        = string
  description = "Name of the bucket holding the team config, for grants of scope \"config_bucket\"."
}

variable "models_bucket" {
  type        = string
  description = "Name of the models bucket, for grants of scope \"models_bucket\"."
}

variable "releases_bucket" {
  type        = string
  description = "Name of the bucket deploy_model copies releases to (the team config's serving.releases_bucket), for grants of scope \"releases_bucket\"; null: the models bucket."
  default     = null
}

variable "sax_bucket" {
  type        = string
  description = "Name of the bucket holding the Sax cell's state, for grants of scope \"sax_bucket\"; null when none of the accounts has one."
  default     = null
}

variable "node_service_account" {
  type        = string
  description = "Email of the service account TPU node pools run as (slices.node_service_account in the team config); grants of scope \"node_service_account\" are skipped when null."
  default     = null
}
