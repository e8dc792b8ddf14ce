variable "project_id" {
  type        = string
  description = "The project to deploy the services to."
}

variable "region" {
  type        = string
  description = "Region of the services."
}

variable "services" {
  type = map(object({
    description        = string
    service_account_id = string
    port               = number
    memory             = string
    cpu                = string
    concurrency        = number
    max_instances      = number
    env                = list(string)
    ingress            = string
    grants = list(object({
      role   = string
      scope  = string
      why    = string
      target = string
    }))
  }))
  description = "The definition's services: system.json `services` (port, size, environment variable names, ingress, service account id and grants)."

  validation {
    condition     = alltrue([for s in values(var.services) : contains(["internal", "all"], s.ingress)])
    error_message = "A service's ingress is \"internal\" or \"all\" (shared/deployment/model.py)."
  }
}

variable "images" {
  type        = map(string)
  description = "Container image of each service, by service name (from the Artifact Registry repository)."
}

variable "args" {
  type        = map(list(string))
  description = "Container arguments by service name (e.g. the load generator's Locust flags); services not listed use the image's defaults."
  default     = {}
}

variable "environment" {
  type        = map(string)
  description = "Values of the environment variables, by name; each service gets the ones its `env` lists."
}

variable "name_prefix" {
  type        = string
  description = "Prefix of the Cloud Run service names."
  default     = "accelops-"
}

variable "ingress" {
  type        = string
  description = "Ingress of the services the definition keeps internal: internal only, or internal plus an internal/external load balancer (put IAP in front of it). A service whose definition says ingress \"all\" (the jobs API) is reachable from any network, IAM-authenticated."
  default     = "INGRESS_TRAFFIC_INTERNAL_ONLY"

  validation {
    condition     = contains(["INGRESS_TRAFFIC_INTERNAL_ONLY", "INGRESS_TRAFFIC_INTERNAL_LOAD_BALANCER"], var.ingress)
    error_message = "ingress must be INGRESS_TRAFFIC_INTERNAL_ONLY or INGRESS_TRAFFIC_INTERNAL_LOAD_BALANCER: the services are not public."
  }
}

variable "invokers" {
  type        = map(list(string))
  description = "IAM members allowed to call each service (roles/run.invoker), by service name, e.g. { dashboard = [\"group:ml-team@example.com\"] }."
  default     = {}

  validation {
    condition     = !contains(flatten(values(var.invokers)), "allUsers") && !contains(flatten(values(var.invokers)), "allAuthenticatedUsers")
    error_message = "The services are IAM-authenticated: allUsers and allAuthenticatedUsers are refused."
  }
}

variable "topic_ids" {
  type        = map(string)
  description = "Topic id by topic name, for the services' publish grants."
}

variable "dataset_id" {
  type        = string
  description = "The metrics dataset, for grants of scope \"dataset\"."
}

variable "config_bucket" {
  type        = string
  description = "Bucket holding the team config, for grants of scope \"config_bucket\"."
}

variable "models_bucket" {
  type        = string
  description = "Model artifacts bucket, for grants of scope \"models_bucket\"."
}

variable "labels" {
  type        = map(string)
  description = "Labels for the services."
  default     = {}
}

variable "deletion_protection" {
  type        = bool
  description = "Refuse to destroy (or replace) the Cloud Run services. They hold no state, so false: destroy and replacements work."
  default     = false
}
