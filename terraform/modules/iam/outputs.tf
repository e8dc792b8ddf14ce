output "custom_role_names" {
  description = "Full name (projects/<project>/roles/<id>) of each custom role, by role id."
  value       = local.custom_role_names
}

output "project_bindings" {
  description = "The project-level bindings made, as \"<principal>/<role>\" => role name."
  value       = { for key, binding in google_project_iam_member.grant : key => binding.role }
}

output "cluster_bindings" {
  description = "The project-level bindings held to one cluster by their condition, as \"<principal>/<role>/<cluster>\" => condition title."
  value       = { for key, binding in google_project_iam_member.cluster_grant : key => binding.condition[0].title }

  # Checked here, not on the bindings: a grant bound nowhere has no binding to check.
  precondition {
    condition     = length(local.unbound) == 0
    error_message = "Grants of a cluster scope that `clusters` does not name: ${join(", ", local.unbound)}."
  }
}
