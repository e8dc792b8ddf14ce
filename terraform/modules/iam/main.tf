/**
 * The only project-wide permissions accelops holds: its custom roles, and the
 * grants of scope "project" in the definition (terraform/generated/system.json).
 * Everything else is bound on the one resource it is about (modules/grants).
 */

locals {
  # One binding per (principal, role). The keys come from the definition, so they
  # are known at plan time, before the service accounts exist.
  project_grants = {
    for grant in flatten([
      for principal, grants in var.grants : [
        for g in grants : { principal = principal, role = g.role } if g.scope == "project"
      ]
    ]) : "${grant.principal}/${grant.role}" => grant
  }

  # A role without the "roles/" prefix names a custom role of this project; using the
  # resource's name (projects/<project>/roles/<id>) also orders the role first.
  custom_role_names = { for id, role in google_project_iam_custom_role.role : id => role.name }
}

resource "google_project_iam_custom_role" "role" {
  for_each = var.custom_roles

  project     = var.project_id
  role_id     = each.key
  title       = each.value.title
  description = each.value.description
  permissions = each.value.permissions
}

resource "google_project_iam_member" "grant" {
  for_each = local.project_grants

  project = var.project_id
  role    = lookup(local.custom_role_names, each.value.role, each.value.role)
  member  = var.members[each.value.principal]

  lifecycle {
    precondition {
      condition     = startswith(each.value.role, "roles/") || contains(keys(var.custom_roles), each.value.role)
      error_message = "${each.value.principal}: role ${each.value.role} is neither a predefined role (roles/...) nor one of the definition's custom_roles."
    }
  }
}
