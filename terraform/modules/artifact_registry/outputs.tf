output "id" {
  description = "Repository id (projects/<project>/locations/<location>/repositories/<id>)."
  value       = google_artifact_registry_repository.images.id
}

output "url" {
  description = "Docker registry path of the repository: <location>-docker.pkg.dev/<project>/<id>."
  value       = "${google_artifact_registry_repository.images.location}-docker.pkg.dev/${var.project_id}/${google_artifact_registry_repository.images.repository_id}"
}
