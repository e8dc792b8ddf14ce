/**
 * Log sinks that turn cluster events into Pub/Sub messages (a pod that cannot
 * be scheduled triggers a reconcile at once). Each sink has its own writer
 * identity, allowed to publish to its one topic and nowhere else.
 */

locals {
  # The definition writes the filters with placeholders; fill them in here.
  filters = {
    for name, sink in var.sinks : name => replace(
      replace(sink.filter, "$${project_id}", var.project_id),
      "$${cluster_name}", var.cluster_name
    )
  }
}

resource "google_logging_project_sink" "sink" {
  for_each = var.sinks

  project                = var.project_id
  name                   = each.key
  description            = each.value.description
  destination            = "pubsub.googleapis.com/${var.topic_ids[each.value.topic]}"
  filter                 = local.filters[each.key]
  unique_writer_identity = true

  lifecycle {
    precondition {
      condition     = contains(keys(var.topic_ids), each.value.topic)
      error_message = "Log sink ${each.key} writes to ${each.value.topic}, which is not one of the definition's topics."
    }
  }
}

resource "google_pubsub_topic_iam_member" "writer" {
  for_each = var.sinks

  project = var.project_id
  topic   = var.topic_ids[each.value.topic]
  role    = "roles/pubsub.publisher"
  member  = google_logging_project_sink.sink[each.key].writer_identity
}
