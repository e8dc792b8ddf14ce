output "sink_ids" {
  description = "Log sink id by sink name."
  value       = { for name, sink in google_logging_project_sink.sink : name => sink.id }
}

output "writer_identities" {
  description = "Writer identity of each sink (the member granted publish on its topic)."
  value       = { for name, sink in google_logging_project_sink.sink : name => sink.writer_identity }
}

output "filters" {
  description = "Each sink's filter with the placeholders filled in."
  value       = local.filters
}
