variable "project_id" {
  type        = string
  description = "The project of the accelops cluster and of the role bindings."
}

variable "cluster_name" {
  type        = string
  description = "The cluster accelops acts on (ACCELOPS_CLUSTER)."
  nullable    = false
}

variable "cluster_location" {
  type        = string
  description = "Its location (ACCELOPS_LOCATION): a region or a zone."
  nullable    = false
}

variable "pool_schedule_clusters" {
  type        = list(string)
  description = "The team config's pool_schedule.clusters (projects/P/locations/L/clusters/C); empty: pool_schedule acts on the accelops cluster."
  default     = []

  validation {
    condition     = alltrue([for c in var.pool_schedule_clusters : can(regex("^projects/[^/]+/locations/[^/]+/clusters/[^/]+$", c))])
    error_message = "pool_schedule.clusters entries are cluster resource names: projects/P/locations/L/clusters/C."
  }
}

variable "node_service_account" {
  type        = string
  description = "The team config's slices.node_service_account: the email TPU node pools run as."
  default     = null
}

variable "created_node_service_account" {
  type        = string
  description = "The node service account of a cluster created with this deployment (modules/gke), named in the error when the config names none; null: no cluster created."
  default     = null
}
