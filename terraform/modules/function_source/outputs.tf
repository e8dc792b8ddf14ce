output "object" {
  description = "Object name of the uploaded archive in the bucket (functions/<sha256>.zip)."
  value       = google_storage_bucket_object.source.name
}

output "sha256" {
  description = "SHA-256 of the archive: the same source always gives the same value."
  value       = data.archive_file.source.output_sha256
}

output "files" {
  description = "The files the archive holds, by their name in it."
  value       = concat(["main.py", "requirements.txt"], local.package_files)
}
