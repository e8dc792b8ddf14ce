output "custom_role_names" {
  description = "Full name (projects/<project>/roles/<id>) of each custom role, by role id."
  value       = local.custom_role_names
}

output "project_bindings" {
  description = "The project-level bindings made, as \"<principal>/<role>\" => role name."
  value       = { for key, binding in google_project_iam_member.grant : key => binding.role }
}
