output "service_account" {
  description = "The build identity as build_config.service_account wants it (projects/<project>/serviceAccounts/<email>), known once its grants have had time to take effect."
  value       = time_sleep.grants.triggers["service_account"]
}

output "service_account_email" {
  description = "Email of the build identity."
  value       = google_service_account.build.email
}

output "repository" {
  description = "The image repository as build_config.docker_repository wants it (projects/<project>/locations/<region>/repositories/<id>), known once the grants have had time to take effect."
  value       = time_sleep.grants.triggers["repository"]
}
