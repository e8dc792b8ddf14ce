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
  description = "URL of each Cloud Run service (IAM-authenticated; internal ingress except the jobs API)."
  value       = module.services.urls
}

output "jobs_api_url" {
  description = "The jobs API's URL: pass it to `accelops jobs ... --api` (or ACCELOPS_JOBS_API); ID tokens for it are minted with this URL as audience."
  value       = module.services.deterministic_urls["jobs_api"]
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
  description = "Service account email of every function and service, of the model servers' workload identities, and of the Pub/Sub push, Eventarc and function build identities (the Kubernetes RBAC bindings of `accelops manifests render` name the functions' accounts)."
  value = merge(
    module.functions.service_account_emails,
    module.services.service_account_emails,
    module.workload_identity.emails,
    { push_invoker = module.pubsub.push_invoker_email },
    { eventarc_invoker = module.storage_events.eventarc_invoker_email },
    { function_build = module.function_build.service_account_email },
  )
}

output "config_uri" {
  description = "gs:// URI of the uploaded team config (ACCELOPS_CONFIG)."
  value       = module.buckets.config_uri
}

output "buckets" {
  description = "Bucket names: team config, function source, models (uploads), releases, the Sax cell's state."
  value = {
    config          = module.buckets.config_bucket
    function_source = module.buckets.source_bucket
    models          = module.buckets.models_bucket
    releases        = coalesce(var.releases_bucket, module.buckets.models_bucket)
    sax             = module.buckets.sax_bucket
  }
}

output "model_uploads" {
  description = "How uploads reach deploy_model: the route, and on the eventarc route the trigger and the subscription Eventarc created for it (give it the definition's retry policy: next_steps)."
  value = {
    route         = module.storage_events.route
    triggers      = module.storage_events.eventarc_triggers
    subscriptions = module.storage_events.eventarc_subscriptions
    notifications = module.storage_events.notifications
  }
}

output "model_serving" {
  description = "What `accelops manifests render` needs for the serving namespace: the Sax bucket and root, and the workload identities' emails."
  value = {
    sax_bucket = module.buckets.sax_bucket
    sax_root   = module.buckets.sax_root
    identities = module.workload_identity.emails
  }
}

output "image_repository" {
  description = "Artifact Registry path to push the service images to (<repository>/<service>:<tag>)."
  value       = module.artifact_registry.url
}

output "images" {
  description = "The image each Cloud Run service runs, by service (<image_repository>/<service>:<image_tags[service]>): what `accelops deploy up` builds and pushes before the full apply."
  value       = local.images
}

output "dataset_id" {
  description = "The metrics dataset."
  value       = module.bigquery.dataset_id
}

output "cluster" {
  description = "The cluster accelops acts on (ACCELOPS_CLUSTER, ACCELOPS_LOCATION), the service account TPU node pools run as (the team config's slices.node_service_account) and, when created here, the cluster's own node service account."
  value = {
    name                 = local.cluster_name
    location             = local.cluster_location
    node_service_account = module.cluster_scope.node_service_account
    created_node_account = var.create_cluster ? module.gke[0].node_service_account_email : null
  }
}

output "function_source" {
  description = "The functions' source archive Terraform built from this repository: its object in the function source bucket (functions/<sha256>.zip) and the files it holds."
  value = {
    object = module.function_source.object
    files  = module.function_source.files
  }
}

output "next_steps" {
  description = "What finishes a deployment applied by hand, from the repository root: `accelops deploy up --from credentials` runs it (waiting where it must), or the commands themselves in order: cluster credentials, the controllers and the wait for them and their webhooks, the overlay, the definition's retry policy on Eventarc's subscriptions, a check from outside."
  value = join("\n", concat(
    [
      "# From the repository root. All of it, in order: accelops deploy up --config ${local.next_config} --project ${var.project_id} --from credentials",
      "gcloud container clusters get-credentials ${local.cluster_name} --location ${local.cluster_location} --project ${var.project_id}",
      # Kueue's and JobSet's admission webhooks are failurePolicy: Fail: until their
      # controllers run, every ClusterQueue, ResourceFlavor and JobSet is refused.
      "kubectl apply --server-side -k manifests/controllers",
      "kubectl wait --for=condition=Available --timeout=300s deployment/kueue-controller-manager -n kueue-system",
      "kubectl wait --for=condition=Available --timeout=300s deployment/jobset-controller-manager -n jobset-system",
      "accelops manifests render --config ${local.next_config} --project ${var.project_id} --sax-bucket ${module.buckets.sax_bucket} --out overlay",
      # Available is not enough: the webhooks answer once their endpoints and
      # certificates are in place (a server-side dry run shows it).
      "for attempt in $(seq 60); do if ! kubectl apply --server-side --dry-run=server -k overlay 2>&1 | grep -Eq '${local.webhooks_not_ready}'; then break; fi; sleep 5; done",
      "kubectl apply --server-side -k overlay",
    ],
    # Eventarc creates its subscriptions with its own retry defaults and no dead
    # letters: give them the definition's.
    [
      for name, subscription in module.storage_events.eventarc_subscriptions :
      "gcloud pubsub subscriptions update ${subscription} --ack-deadline=${local.system.functions[name].ack_deadline_seconds} --min-retry-delay=${local.system.functions[name].minimum_backoff_seconds}s --max-retry-delay=${local.system.functions[name].maximum_backoff_seconds}s --dead-letter-topic=${module.pubsub.topic_ids[local.system.functions[name].dead_letter_topic]} --max-delivery-attempts=${local.system.functions[name].max_delivery_attempts}"
    ],
    [
      "ACCELOPS_PROJECT=${var.project_id} ACCELOPS_LOCATION=${local.cluster_location} ACCELOPS_CLUSTER=${local.cluster_name} accelops doctor --config ${module.buckets.config_uri}",
      "ACCELOPS_JOBS_API=${module.services.deterministic_urls["jobs_api"]} accelops jobs list",
    ],
  ))
}

locals {
  # next_steps' commands run from the repository root: the config by its full path.
  next_config = abspath(coalesce(var.config_file, "${path.module}/accelops.yaml"))
  # What the API server and kubectl say while the controllers cannot admit yet
  # (shared/deployment/up.py WEBHOOKS_NOT_READY; a test keeps the two equal).
  webhooks_not_ready = "failed calling webhook|no endpoints available for service|ensure CRDs are installed first"
}
