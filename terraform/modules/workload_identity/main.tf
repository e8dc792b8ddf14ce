/**
 * The identities the model servers and the load generator on GKE run as (system.json
 * `serving.workload_identities`): a Google service account each, with only the
 * definition's grants (read the releases; the Saxml one also keeps the Sax cell's
 * state; the load generator's publishes to the metrics topic), which the Kubernetes
 * service account of the same identity may impersonate (roles/iam.workloadIdentityUser
 * for `<project>.svc.id.goog[<namespace>/<ksa>]`). `accelops manifests render`
 * creates those Kubernetes service accounts, annotated with the emails below.
 *
 * An identity is bound in each namespace its scopes name: the serving namespace,
 * and the Saxml team's namespace when one is given (model servers are JobSets
 * queued there).
 */

locals {
  # The cluster's Workload Identity pool (a GKE cluster with Workload Identity in
  # this project: modules/gke creates it with one).
  workload_pool = "${var.project_id}.svc.id.goog"

  bindings = merge([
    for name, identity in var.identities : {
      for scope in identity.scopes : "${name}/${scope}" => {
        identity  = name
        namespace = var.namespaces[scope]
        ksa       = identity.kubernetes_service_account
      } if try(var.namespaces[scope], null) != null
    }
  ]...)
}

resource "google_service_account" "identity" {
  for_each = var.identities

  project      = var.project_id
  account_id   = each.value.service_account_id
  display_name = "accelops ${each.key} servers"
  description  = substr(each.value.description, 0, 256)
}

resource "google_service_account_iam_member" "workload_identity" {
  for_each = local.bindings

  service_account_id = google_service_account.identity[each.value.identity].name
  role               = "roles/iam.workloadIdentityUser"
  member             = "serviceAccount:${local.workload_pool}[${each.value.namespace}/${each.value.ksa}]"
}

module "grants" {
  source = "../grants"

  project_id = var.project_id
  principals = {
    for name, identity in var.identities : name => {
      member = "serviceAccount:${google_service_account.identity[name].email}"
      grants = identity.grants
    }
  }
  topic_ids       = var.topic_ids
  config_bucket   = var.config_bucket
  models_bucket   = var.models_bucket
  releases_bucket = var.releases_bucket
  sax_bucket      = var.sax_bucket
}
