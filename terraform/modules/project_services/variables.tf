variable "project_id" {
  type        = string
  description = "The project to prepare."
}

variable "activate_apis" {
  type        = list(string)
  description = "APIs to enable (never disabled on destroy: other workloads of the project may use them)."
}

variable "service_agents" {
  type        = list(string)
  description = "Services whose service agent is generated here (each must also be in activate_apis)."
  default     = ["pubsub.googleapis.com", "eventarc.googleapis.com"]
}

variable "settle_duration" {
  type        = string
  description = "How long to wait after enabling APIs and generating service agents before the rest is created (a Go duration, e.g. \"60s\")."
  default     = "60s"
}
