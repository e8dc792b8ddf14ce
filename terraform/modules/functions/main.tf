/**
 * One Cloud Run function (gen2) per function of the definition, each with its own
 * service account and only the grants the definition lists for it.
 *
 * Each is built by Cloud Build as the build identity of modules/function_build
 * (build_config.service_account, provider >= 5.26: CHANGELOG_v5.md 5.26.0), into
 * that module's image repository (build_config.docker_repository), from the
 * archive modules/function_source uploaded under its content hash: a new source is
 * a new object name, which redeploys every function, and the same source changes
 * nothing.
 *
 * No event_trigger: the push subscriptions of modules/pubsub deliver the events,
 * so the retry and dead-letter policy is the definition's, and the functions
 * accept requests only from inside the project (ingress ALLOW_INTERNAL_ONLY,
 * which admits Pub/Sub push and Eventarc) and only from the push service account
 * (run.invoker; modules/storage_events adds its Eventarc identity where a
 * trigger feeds a function).
 *
 * A function whose definition says vpc_egress (it calls an address inside the
 * cluster's VPC, like the Saxml HTTP proxy's internal load balancer) sends its
 * private-range traffic through var.vpc_connector; the others reach Google APIs
 * only and get no connector.
 */

locals {
  # service_config.service is the full resource name the API returns
  # (projects/P/locations/L/services/S). Eventarc's destination.cloud_run_service.service
  # wants the service's name: provider >= 6.21 sends the value unchanged
  # (google/services/eventarc/resource_eventarc_trigger.go,
  # expandEventarcTriggerDestinationCloudRunServiceService, v6.21.0 and v6.50.0), and a
  # path there fails the trigger's creation. The IAM resources accept either.
  service_names = {
    for name, f in google_cloudfunctions2_function.function : name => regex("[^/]+$", f.service_config[0].service)
  }
}

resource "google_service_account" "function" {
  for_each = var.functions

  project      = var.project_id
  account_id   = each.value.service_account_id
  display_name = "accelops ${each.key}"
  description  = substr(each.value.description, 0, 256)
}

resource "google_cloudfunctions2_function" "function" {
  for_each = var.functions

  project     = var.project_id
  location    = var.region
  name        = "${var.name_prefix}${replace(each.key, "_", "-")}"
  description = each.value.description
  labels      = var.labels

  build_config {
    runtime           = var.runtime
    entry_point       = each.value.entry_point
    service_account   = var.build_service_account
    docker_repository = var.build_repository

    source {
      storage_source {
        bucket = var.source_bucket
        object = var.source_object
      }
    }
  }

  service_config {
    available_memory                 = each.value.memory
    available_cpu                    = each.value.cpu
    timeout_seconds                  = each.value.timeout_seconds
    max_instance_request_concurrency = each.value.concurrency
    max_instance_count               = each.value.max_instances
    min_instance_count               = 0
    ingress_settings                 = "ALLOW_INTERNAL_ONLY"
    all_traffic_on_latest_revision   = true
    service_account_email            = google_service_account.function[each.key].email
    environment_variables            = { for name in each.value.env : name => var.environment[name] }
    vpc_connector                    = each.value.vpc_egress ? var.vpc_connector : null
    vpc_connector_egress_settings    = each.value.vpc_egress && var.vpc_connector != null ? "PRIVATE_RANGES_ONLY" : null
  }

  lifecycle {
    precondition {
      condition     = alltrue([for name in each.value.env : try(var.environment[name], null) != null])
      error_message = "Function ${each.key} needs the environment variables ${join(", ", each.value.env)}; `environment` has no value for ${join(", ", [for name in each.value.env : name if try(var.environment[name], null) == null])}."
    }
  }
}

# Only the push service account may invoke a function.
resource "google_cloud_run_v2_service_iam_member" "push_invoker" {
  for_each = var.functions

  project  = var.project_id
  location = var.region
  name     = local.service_names[each.key]
  role     = "roles/run.invoker"
  member   = var.push_invoker_member
}

module "grants" {
  source = "../grants"

  project_id = var.project_id
  principals = {
    for name, f in var.functions : name => {
      member = "serviceAccount:${google_service_account.function[name].email}"
      grants = f.grants
    }
  }
  topic_ids            = var.topic_ids
  table_ids            = var.table_ids
  dataset_id           = var.dataset_id
  config_bucket        = var.config_bucket
  models_bucket        = var.models_bucket
  releases_bucket      = var.releases_bucket
  node_service_account = var.node_service_account
}
