variable "project_id" {
  type        = string
  description = "The project of the service accounts and of the cluster's Workload Identity pool."
}

variable "identities" {
  type = map(object({
    description                = string
    service_account_id         = string
    kubernetes_service_account = string
    scopes                     = list(string)
    grants = list(object({
      role   = string
      scope  = string
      why    = string
      target = string
    }))
  }))
  description = "The definition's workload identities: system.json `serving.workload_identities` (account id, Kubernetes service account, namespace scopes, grants)."
}

variable "namespaces" {
  type        = map(string)
  description = "Namespace by identity scope: serving_namespace (system.json `serving.namespace`) and saxml_namespace (the namespace of the team config's serving.saxml_team, or null: no binding there)."

  validation {
    condition     = try(var.namespaces["serving_namespace"], null) != null
    error_message = "namespaces needs serving_namespace."
  }
}

variable "topic_ids" {
  type        = map(string)
  description = "Topic id (projects/<project>/topics/<name>) by topic name, for grants of scope \"topic\" (the load generator publishes its records)."
  default     = {}
}

variable "config_bucket" {
  type        = string
  description = "Name of the team config bucket, for grants of scope \"config_bucket\"."
}

variable "models_bucket" {
  type        = string
  description = "Name of the models bucket, for grants of scope \"models_bucket\"."
}

variable "releases_bucket" {
  type        = string
  description = "Bucket deploy_model copies releases to; null: the models bucket."
  default     = null
}

variable "sax_bucket" {
  type        = string
  description = "Name of the bucket holding the Sax cell's state, for grants of scope \"sax_bucket\"."
}
