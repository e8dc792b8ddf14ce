variable "project_id" {
  type        = string
  description = "The project of the scheduler jobs."
}

variable "region" {
  type        = string
  description = "Region of the scheduler jobs."
}

variable "jobs" {
  type = map(object({
    schedule    = string
    time_zone   = string
    topic       = string
    data        = string
    attributes  = map(string)
    description = string
  }))
  description = "Scheduler jobs by name: system.json `scheduler_jobs`."
}

variable "topic_ids" {
  type        = map(string)
  description = "Topic id (projects/<project>/topics/<name>) by topic name."
}

variable "paused" {
  type        = bool
  description = "Create the jobs paused (e.g. while the cluster is not ready yet)."
  default     = false
}
