/**
 * The Docker repository the service images (services/<name>/Dockerfile) are pushed to.
 */

resource "google_artifact_registry_repository" "images" {
  #checkov:skip=CKV_GCP_84:Google-managed encryption; a customer-managed key is optional (var.kms_key_name) and needs a key ring this module does not own.
  project       = var.project_id
  location      = var.location
  repository_id = var.repository_id
  description   = var.description
  format        = "DOCKER"
  kms_key_name  = var.kms_key_name
  labels        = var.labels

  docker_config {
    immutable_tags = var.immutable_tags
  }
}
