/**
 * What Cloud Build needs to build the functions: an identity of its own, the
 * repository the images go to, and exactly the roles such a build uses.
 *
 * Without build_config.service_account a function is built as the project's
 * default build account, which projects created since mid-2024, and organizations
 * that disable default grants, leave without those roles: every build fails.
 * Google's "Custom Service Account for Cloud Build" (Cloud Run functions) lists what
 * the build identity needs: roles/logging.logWriter (build logs),
 * roles/artifactregistry.writer (the built image; by default on the gcf-artifacts
 * repository, or on the one build_config.docker_repository names) and read access
 * to the source archive. The images go to a repository of their own here, so the
 * writer role is bound on it alone (gcf-artifacts does not exist before the first
 * build, so nothing could be bound on it in the same apply); the archive is read
 * from the function source bucket (roles/storage.objectViewer there). Logs have no
 * narrower scope than the project.
 *
 * Grants take a while to reach every Google service: the functions wait for them
 * (the outputs are read through time_sleep.grants).
 */

resource "google_service_account" "build" {
  project      = var.project_id
  account_id   = var.build_account_id
  display_name = "accelops function builds"
  description  = "Identity Cloud Build builds the accelops functions as: writes build logs, reads the source archive, pushes the images."
}

resource "google_artifact_registry_repository" "builds" {
  #checkov:skip=CKV_GCP_84:Google-managed encryption; a customer-managed key is optional (var.kms_key_name) and needs a key ring this module does not own.
  project       = var.project_id
  location      = var.region
  repository_id = var.repository_id
  description   = "Images Cloud Build makes of the accelops functions (build_config.docker_repository)."
  format        = "DOCKER"
  kms_key_name  = var.kms_key_name
  labels        = var.labels
}

resource "google_project_iam_member" "build_logs" {
  project = var.project_id
  role    = "roles/logging.logWriter"
  member  = google_service_account.build.member
}

resource "google_artifact_registry_repository_iam_member" "build_images" {
  project    = var.project_id
  location   = google_artifact_registry_repository.builds.location
  repository = google_artifact_registry_repository.builds.name
  role       = "roles/artifactregistry.writer"
  member     = google_service_account.build.member
}

resource "google_storage_bucket_iam_member" "build_source" {
  bucket = var.source_bucket
  role   = "roles/storage.objectViewer"
  member = google_service_account.build.member
}

resource "time_sleep" "grants" {
  create_duration = var.iam_propagation

  triggers = {
    service_account = google_service_account.build.name
    repository      = google_artifact_registry_repository.builds.id
    logs            = google_project_iam_member.build_logs.id
    images          = google_artifact_registry_repository_iam_member.build_images.id
    source          = google_storage_bucket_iam_member.build_source.id
  }
}
