/**
 * The definition's Cloud Run services (the load-test dashboard, the load
 * generator and the jobs API), each with its own service account and only its
 * listed grants. Callable only by the members given in `invokers` (no allUsers),
 * and reachable only from inside the project's networks (`ingress`) unless the
 * definition opens a service to all networks (the jobs API, which people call from
 * their machines: Cloud Run still checks every caller's ID token against
 * `invokers`, and the service checks it again).
 */

data "google_project" "this" {
  project_id = var.project_id
}

locals {
  names = { for name, s in var.services : name => "${var.name_prefix}${replace(name, "_", "-")}" }
}

resource "google_service_account" "service" {
  for_each = var.services

  project      = var.project_id
  account_id   = each.value.service_account_id
  display_name = "accelops ${each.key}"
  description  = substr(each.value.description, 0, 256)
}

resource "google_cloud_run_v2_service" "service" {
  for_each = var.services

  project     = var.project_id
  location    = var.region
  name        = local.names[each.key]
  description = each.value.description
  ingress     = each.value.ingress == "all" ? "INGRESS_TRAFFIC_ALL" : var.ingress
  labels      = var.labels

  # Provider 6.0 added deletion_protection to google_cloud_run_v2_service, true
  # unless set (CHANGELOG 6.0.0; resource_cloud_run_v2_service.go): destroy and every
  # replacement fail. 5.x has no such argument (hence the provider floor 6.0). The
  # services hold no state: false unless var.deletion_protection says otherwise.
  deletion_protection = var.deletion_protection

  template {
    service_account                  = google_service_account.service[each.key].email
    max_instance_request_concurrency = each.value.concurrency

    scaling {
      min_instance_count = 0
      max_instance_count = each.value.max_instances
    }

    containers {
      image = var.images[each.key]
      args  = lookup(var.args, each.key, null)

      ports {
        container_port = each.value.port
      }

      resources {
        limits = {
          cpu    = each.value.cpu
          memory = each.value.memory
        }
      }

      dynamic "env" {
        for_each = each.value.env
        content {
          name  = env.value
          value = var.environment[env.value]
        }
      }
    }
  }

  lifecycle {
    precondition {
      condition     = contains(keys(var.images), each.key)
      error_message = "No image for service ${each.key}: add it to `images`."
    }
    precondition {
      condition     = alltrue([for name in each.value.env : try(var.environment[name], null) != null])
      error_message = "Service ${each.key} needs the environment variables ${join(", ", each.value.env)}; `environment` lacks some of them."
    }
  }
}

resource "google_cloud_run_v2_service_iam_member" "invoker" {
  for_each = {
    for pair in flatten([
      for name, members in var.invokers : [for member in members : { service = name, member = member }]
    ]) : "${pair.service}/${pair.member}" => pair
  }

  project  = var.project_id
  location = var.region
  name     = google_cloud_run_v2_service.service[each.value.service].name
  role     = "roles/run.invoker"
  member   = each.value.member
}

module "grants" {
  source = "../grants"

  project_id = var.project_id
  principals = {
    for name, s in var.services : name => {
      member = "serviceAccount:${google_service_account.service[name].email}"
      grants = s.grants
    }
  }
  topic_ids            = var.topic_ids
  dataset_id           = var.dataset_id
  config_bucket        = var.config_bucket
  models_bucket        = var.models_bucket
  node_service_account = null
}
