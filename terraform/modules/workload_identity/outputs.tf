output "emails" {
  description = "Email of each identity's Google service account, by identity name (the iam.gke.io/gcp-service-account annotation of its Kubernetes service account)."
  value       = { for name, sa in google_service_account.identity : name => sa.email }
}

output "workload_identity_members" {
  description = "The Kubernetes service accounts bound to each Google service account, as \"<identity>/<scope>\" => member."
  value       = { for key, b in google_service_account_iam_member.workload_identity : key => b.member }
}

output "resource_bindings" {
  description = "The resource-level bindings made for the identities (see modules/grants)."
  value       = module.grants.bindings
}
