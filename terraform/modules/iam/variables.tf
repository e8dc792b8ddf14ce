variable "project_id" {
  type        = string
  description = "The project that holds the custom roles and the project-level bindings."
}

variable "custom_roles" {
  type = map(object({
    title       = string
    description = string
    permissions = list(string)
  }))
  description = "Custom roles by role id: system.json `custom_roles`."
}

variable "members" {
  type        = map(string)
  description = "IAM member (serviceAccount:...) of each principal named in `grants`: function and service names from system.json."
}

variable "grants" {
  type = map(list(object({
    role   = string
    scope  = string
    why    = string
    target = string
  })))
  description = "Each principal's grants as system.json lists them; this module binds those of scope \"project\", and those of scope \"cluster\" and \"scheduled_clusters\" once per cluster with its condition."
}

variable "clusters" {
  type        = map(list(string))
  description = "Cluster resource names (projects/P/locations/L/clusters/C) by grant scope: \"cluster\" and \"scheduled_clusters\" (modules/cluster_scope `clusters`)."
}

variable "conditions" {
  type = map(object({
    title       = string
    description = string
    expression  = string
  }))
  description = "The IAM condition holding a binding to one cluster, by cluster resource name (modules/cluster_scope `conditions`)."
}
