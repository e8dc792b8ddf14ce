output "cluster" {
  description = "Resource name of the accelops cluster (projects/P/locations/L/clusters/C)."
  value       = local.cluster
}

output "clusters" {
  description = "Cluster resource names by grant scope: \"cluster\" (the accelops cluster) and \"scheduled_clusters\" (those of this project pool_schedule acts on)."
  value       = local.clusters
}

output "conditions" {
  description = "The IAM condition (title, description, expression) that holds a project-level binding to one cluster, by cluster resource name."
  value       = local.conditions
}

output "foreign_clusters" {
  description = "pool_schedule.clusters in other projects: no binding here reaches them (grant the scheduler's GKE permissions in their projects)."
  value       = local.foreign_clusters
}

output "node_service_account" {
  description = "The service account TPU node pools run as (slices.node_service_account)."
  # The same email either way; reading the created account's makes whatever uses this
  # (the roles/iam.serviceAccountUser grant on it) wait until that account exists.
  value = var.node_service_account == var.created_node_service_account ? var.created_node_service_account : var.node_service_account

  precondition {
    condition     = var.node_service_account != null && can(regex("^[^@/]+@[^@/]+$", coalesce(var.node_service_account, "-")))
    error_message = "The team config names no slices.node_service_account${var.created_node_service_account == null ? "" : " (the created cluster's is ${var.created_node_service_account})"}: TPU node pools would run as the Compute Engine default service account, on which reconcile_slices and pool_schedule hold no iam.serviceAccountUser, and every pool create would fail with 403. Name the account the pools run as (it needs roles/container.defaultNodeServiceAccount)."
  }
}
