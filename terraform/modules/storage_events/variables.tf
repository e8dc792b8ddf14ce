variable "project_id" {
  type        = string
  description = "The project of the buckets, topics and functions."
}

variable "region" {
  type        = string
  description = "Region of the functions and the buckets (an Eventarc trigger for Cloud Storage must be in the bucket's location)."
}

variable "route" {
  type        = string
  description = "How bucket events reach the functions: \"eventarc\" (an Eventarc trigger per function) or \"pubsub\" (Cloud Storage notifications to the function's trigger topic)."
  default     = "eventarc"

  validation {
    condition     = contains(["eventarc", "pubsub"], var.route)
    error_message = "route must be \"eventarc\" or \"pubsub\"."
  }
}

variable "storage_triggers" {
  type = map(object({
    bucket             = string
    object_prefix      = string
    event_type         = string
    notification_event = string
    topic              = string
  }))
  description = "The definition's storage triggers by function name: system.json `storage_triggers` (bucket scope, object prefix, Eventarc event type, notification event, trigger topic)."

  validation {
    condition     = alltrue([for t in values(var.storage_triggers) : t.bucket == "models_bucket"])
    error_message = "A storage trigger names a bucket this module does not know; add it to `buckets` first."
  }
}

variable "buckets" {
  type        = map(string)
  description = "Bucket name by the definition's bucket scope (models_bucket)."
}

variable "topic_ids" {
  type        = map(string)
  description = "Topic id by topic name (modules/pubsub), for the notification route."
}

variable "function_services" {
  type        = map(string)
  description = "Cloud Run service name (not its projects/.../services/... path) of each function (modules/functions `service_names`), for the Eventarc route."

  validation {
    condition     = alltrue([for service in values(var.function_services) : !strcontains(service, "/")])
    error_message = "function_services are Cloud Run service names: Eventarc's destination.cloud_run_service.service refuses a projects/.../services/... path."
  }
}

variable "eventarc_invoker_account_id" {
  type        = string
  description = "Account id of the identity the Eventarc triggers deliver as: system.json `eventarc_invoker_account_id`."
}

variable "name_prefix" {
  type        = string
  description = "Prefix of the trigger names (<prefix><function name with - for _>)."
  default     = "accelops-"
}

variable "labels" {
  type        = map(string)
  description = "Labels for the triggers."
  default     = {}
}

variable "iam_propagation" {
  type        = string
  description = "How long the triggers wait after the grants they rely on (a Go duration)."
  default     = "60s"
}
