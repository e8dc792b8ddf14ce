/**
 * The only project-wide permissions accelops holds: its custom roles, and the
 * grants of scope "project", "cluster" and "scheduled_clusters" in the definition
 * (terraform/generated/system.json). Everything else is bound on the one resource
 * it is about (modules/grants).
 *
 * GKE permissions exist on the project only: a grant of scope "cluster" or
 * "scheduled_clusters" is one binding per cluster of that scope, each with the IAM
 * condition modules/cluster_scope writes for that cluster, so the role holds there
 * and nowhere else (google_project_iam_member `condition`: title, description,
 * expression; registry docs r/google_project_iam, v6.0.0 and v6.50.0).
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

  # One binding per (principal, role, cluster) for the cluster scopes.
  cluster_grants = {
    for grant in flatten([
      for principal, grants in var.grants : [
        for g in grants : [
          for cluster in lookup(var.clusters, g.scope, []) :
          { principal = principal, role = g.role, scope = g.scope, cluster = cluster }
        ]
      ]
    ]) : "${grant.principal}/${grant.role}/${grant.cluster}" => grant
  }

  # A grant of a cluster scope `clusters` does not know would silently be bound
  # nowhere. (A known scope may list no cluster: pool_schedule.clusters naming only
  # clusters of other projects leaves nothing to bind here.)
  unbound = distinct(flatten([
    for principal, grants in var.grants : [
      for g in grants : "${principal}: ${g.role} (${g.scope})"
      if contains(["cluster", "scheduled_clusters"], g.scope) && !contains(keys(var.clusters), g.scope)
    ]
  ]))

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

resource "google_project_iam_member" "cluster_grant" {
  for_each = local.cluster_grants

  project = var.project_id
  role    = lookup(local.custom_role_names, each.value.role, each.value.role)
  member  = var.members[each.value.principal]

  condition {
    title       = var.conditions[each.value.cluster].title
    description = var.conditions[each.value.cluster].description
    expression  = var.conditions[each.value.cluster].expression
  }
}
