# What `accelops manifests render --project`, `accelops doctor` and the team need.

output "project_id" {
  description = "The project (ACCELOPS_PROJECT; pass it as --project)."
  value       = var.project_id
}

output "environment" {
  description = "The ACCELOPS_* settings the functions run with; export them to run `accelops doctor` against this deployment."
  value       = local.environment
}

output "function_names" {
  description = "Cloud Run function name by function."
  value       = module.functions.names
}

output "function_urls" {
  description = "URL (push endpoint) of each function's Cloud Run service."
  value       = module.functions.urls
}

output "service_urls" {
  description = "URL of each Cloud Run service (internal ingress, IAM-authenticated)."
  value       = module.services.urls
}

output "topic_ids" {
  description = "Topic id by topic name (job requests are published to the topic the team config names, see `accelops submit`)."
  value       = module.pubsub.topic_ids
}

output "subscription_ids" {
  description = "Push subscription id by function."
  value       = module.pubsub.subscription_ids
}

output "dead_letter_subscription_ids" {
  description = "Pull subscription holding each dead-letter topic's messages."
  value       = module.pubsub.dead_letter_subscription_ids
}

output "service_account_emails" {
  description = "Service account email of every function and service, and of the Pub/Sub push identity (the Kubernetes RBAC bindings of `accelops manifests render` name the functions' accounts)."
  value = merge(
    module.functions.service_account_emails,
    module.services.service_account_emails,
    { push_invoker = module.pubsub.push_invoker_email },
  )
}

output "config_uri" {
  description = "gs:// URI of the uploaded team config (ACCELOPS_CONFIG)."
  value       = module.buckets.config_uri
}

output "buckets" {
  description = "Bucket names: team config, function source, model artifacts."
  value = {
    config          = module.buckets.config_bucket
    function_source = module.buckets.source_bucket
    models          = module.buckets.models_bucket
  }
}

output "image_repository" {
  description = "Artifact Registry path to push the service images to (<repository>/<service>:<tag>)."
  value       = module.artifact_registry.url
}

output "dataset_id" {
  description = "The metrics dataset."
  value       = module.bigquery.dataset_id
}

output "cluster" {
  description = "The cluster accelops acts on (ACCELOPS_CLUSTER, ACCELOPS_LOCATION) and, when created here, its node service account."
  value = {
    name                 = local.cluster_name
    location             = local.cluster_location
    node_service_account = var.create_cluster ? module.gke[0].node_service_account_email : null
  }
}

output "next_steps" {
  description = "Commands to finish the deployment: the Kubernetes side, then a check from outside."
  value       = <<-EOT
    gcloud container clusters get-credentials ${local.cluster_name} --location ${local.cluster_location} --project ${var.project_id}
    accelops manifests render --config ${coalesce(var.config_file, "${path.module}/accelops.yaml")} --project ${var.project_id} --out overlay
    kubectl apply --server-side -k overlay
    ACCELOPS_PROJECT=${var.project_id} ACCELOPS_LOCATION=${local.cluster_location} ACCELOPS_CLUSTER=${local.cluster_name} accelops doctor --config ${module.buckets.config_uri}
  EOT
}
