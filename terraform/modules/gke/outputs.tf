output "name" {
  description = "Cluster name (ACCELOPS_CLUSTER)."
  value       = google_container_cluster.cluster.name
}

output "location" {
  description = "Cluster location (ACCELOPS_LOCATION)."
  value       = google_container_cluster.cluster.location
}

output "endpoint" {
  description = "The control plane's endpoint."
  value       = google_container_cluster.cluster.endpoint
  sensitive   = true
}

output "workload_pool" {
  description = "The Workload Identity pool of the cluster."
  value       = local.workload_pool
}

output "node_service_account_email" {
  description = "Email of the node service account (the CPU pool's); name it as slices.node_service_account to run TPU pools under it too. Known at plan: <account id>@<project>.iam.gserviceaccount.com."
  value       = "${google_service_account.nodes.account_id}@${var.project_id}.iam.gserviceaccount.com"
}

output "network" {
  description = "Id of the cluster's VPC network."
  value       = google_compute_network.network.id
}

output "subnetwork" {
  description = "Id of the cluster's subnet."
  value       = google_compute_subnetwork.subnet.id
}
