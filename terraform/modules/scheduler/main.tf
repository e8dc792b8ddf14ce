/**
 * Cloud Scheduler jobs that publish to a topic of the definition (the
 * level-triggered reconcile tick). The job's message goes through the same push
 * subscription, retry and dead-letter policy as every other event.
 */

resource "google_cloud_scheduler_job" "job" {
  for_each = var.jobs

  project     = var.project_id
  region      = var.region
  name        = each.key
  description = each.value.description
  schedule    = each.value.schedule
  time_zone   = each.value.time_zone
  paused      = var.paused

  pubsub_target {
    topic_name = var.topic_ids[each.value.topic]
    data       = base64encode(each.value.data)
    attributes = each.value.attributes
  }

  lifecycle {
    precondition {
      condition     = contains(keys(var.topic_ids), each.value.topic)
      error_message = "Scheduler job ${each.key} publishes to ${each.value.topic}, which is not one of the definition's topics."
    }
  }
}
