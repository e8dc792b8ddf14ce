output "names" {
  description = "Cloud Run function name by function name."
  value       = { for name, f in google_cloudfunctions2_function.function : name => f.name }
}

output "service_names" {
  description = "Name (not the projects/.../services/... path) of each function's Cloud Run service, what Eventarc triggers deliver to, by function name."
  value       = local.service_names
}

output "urls" {
  description = "HTTPS URL of each function's Cloud Run service (the push endpoint), by function name."
  value       = { for name, f in google_cloudfunctions2_function.function : name => f.service_config[0].uri }
}

output "service_account_emails" {
  description = "Email of each function's service account, by function name."
  value       = { for name, sa in google_service_account.function : name => sa.email }
}

output "service_account_members" {
  description = "IAM member of each function's service account, by function name."
  value       = { for name, sa in google_service_account.function : name => "serviceAccount:${sa.email}" }
}

output "resource_bindings" {
  description = "The resource-level bindings made for the functions (see modules/grants)."
  value       = module.grants.bindings
}
