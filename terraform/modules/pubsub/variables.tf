variable "project_id" {
  type        = string
  description = "The project of the topics and subscriptions."
}

variable "topics" {
  type        = list(string)
  description = "Every topic of the definition, dead-letter topics included: system.json `topics`."
}

variable "functions" {
  type = map(object({
    trigger_topic           = string
    subscription            = string
    dead_letter_topic       = string
    ack_deadline_seconds    = number
    minimum_backoff_seconds = number
    maximum_backoff_seconds = number
    max_delivery_attempts   = number
  }))
  description = "The definition's functions (system.json `functions`): each one's trigger topic, push subscription, retry and dead-letter policy."
}

variable "push_endpoints" {
  type        = map(string)
  description = "HTTPS URL of each function's Cloud Run service, by function name: the push endpoint and the OIDC audience."
}

variable "push_invoker_account_id" {
  type        = string
  description = "Account id of the service account Pub/Sub pushes as: system.json `push_invoker_account_id`."
}

variable "dead_letter_subscription_suffix" {
  type        = string
  description = "Appended to a dead-letter topic's name to name the pull subscription that keeps its messages."
  default     = "-pull"
}

variable "dead_letter_retention" {
  type        = string
  description = "How long dead letters are kept on their pull subscription (at most 7 days)."
  default     = "604800s"
}

variable "dead_letter_ack_deadline_seconds" {
  type        = number
  description = "Ack deadline of the dead-letter pull subscriptions (time to inspect and replay one message)."
  default     = 600
}

variable "kms_key_name" {
  type        = string
  description = "Cloud KMS key to encrypt the topics with; null for Google-managed encryption."
  default     = null
}

variable "labels" {
  type        = map(string)
  description = "Labels for the topics and subscriptions."
  default     = {}
}
