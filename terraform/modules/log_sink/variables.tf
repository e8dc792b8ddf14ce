variable "project_id" {
  type        = string
  description = "The project whose logs are routed (fills the filters' project_id placeholder)."
}

variable "sinks" {
  type = map(object({
    topic       = string
    filter      = string
    description = string
  }))
  description = "Log sinks by name: system.json `log_sinks` (filters with project_id and cluster_name placeholders)."
}

variable "topic_ids" {
  type        = map(string)
  description = "Topic id (projects/<project>/topics/<name>) by topic name."
}

variable "cluster_name" {
  type        = string
  description = "The GKE cluster whose events are routed (fills the filters' cluster_name placeholder)."
}
