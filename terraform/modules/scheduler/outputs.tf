output "job_ids" {
  description = "Scheduler job id by job name."
  value       = { for name, job in google_cloud_scheduler_job.job : name => job.id }
}
