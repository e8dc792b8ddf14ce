output "urls" {
  description = "URL of each Cloud Run service, by service name."
  value       = { for name, s in google_cloud_run_v2_service.service : name => s.uri }
}

output "deterministic_urls" {
  description = "The https://<name>-<project number>.<region>.run.app URL of each service, by service name: known before the service exists, so a service's environment can name its own URL (the jobs API's token audience)."
  value       = { for name, service_name in local.names : name => "https://${service_name}-${data.google_project.this.number}.${var.region}.run.app" }
}

output "names" {
  description = "Cloud Run service name by service name."
  value       = { for name, s in google_cloud_run_v2_service.service : name => s.name }
}

output "service_account_emails" {
  description = "Email of each service's service account, by service name."
  value       = { for name, sa in google_service_account.service : name => sa.email }
}

output "service_account_members" {
  description = "IAM member of each service's service account, by service name."
  value       = { for name, sa in google_service_account.service : name => "serviceAccount:${sa.email}" }
}

output "resource_bindings" {
  description = "The resource-level bindings made for the services (see modules/grants)."
  value       = module.grants.bindings
}
