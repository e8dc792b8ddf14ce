output "config_bucket" {
  description = "Name of the bucket holding the team config."
  value       = google_storage_bucket.config.name
}

output "config_uri" {
  description = "gs:// URI of the uploaded team config: the value of ACCELOPS_CONFIG."
  value       = "gs://${google_storage_bucket.config.name}/${google_storage_bucket_object.config.name}"
}

output "source_bucket" {
  description = "Name of the bucket holding the functions' source archives."
  value       = google_storage_bucket.source.name
}

output "models_bucket" {
  description = "Name of the model artifacts bucket."
  value       = google_storage_bucket.models.name
}

output "sax_bucket" {
  description = "Name of the bucket holding the Sax cell's state (accelops manifests render --sax-bucket)."
  value       = google_storage_bucket.sax.name
}

output "sax_root" {
  description = "The Sax cell's root (SAX_ROOT of the admin server, proxy and model servers)."
  value       = "gs://${google_storage_bucket.sax.name}/sax-root"
}
