/**
 * Bucket events to the functions that want them (system.json `storage_triggers`),
 * by one of two routes:
 *
 * - "eventarc" (default): an Eventarc trigger on the bucket for the definition's
 *   event type, delivering to the function's Cloud Run service as a dedicated
 *   identity (roles/eventarc.eventReceiver on the project, the only level the
 *   role exists at; roles/run.invoker on that one service). Eventarc cannot
 *   filter Cloud Storage events by object name: every object of the bucket
 *   arrives, and the function ignores names outside the object prefix. Eventarc
 *   creates the trigger's Pub/Sub topic and subscription itself, with its own
 *   defaults (10-600 s backoff, 24 h retention, no dead-letter topic): the
 *   `eventarc_subscriptions` output names them, and the example's `next_steps`
 *   prints the gcloud command that gives them the definition's ack deadline,
 *   backoff and dead-letter policy. The Cloud Storage service agent publishes to
 *   Eventarc's topic, whose name is not known in advance: roles/pubsub.publisher
 *   on the project, as Eventarc requires for Cloud Storage triggers.
 *
 * - "pubsub": the bucket's Cloud Storage Pub/Sub notifications for the object
 *   prefix and event, published to the function's trigger topic, which the push
 *   subscription of modules/pubsub delivers with the definition's policy. The
 *   service agent may publish to that topic only.
 *
 * A trigger is created right after the grants it relies on: Eventarc checks them
 * at creation, and a grant takes a while to reach it, so the triggers wait
 * (time_sleep.grants) after the grants, as they wait for the Eventarc service agent
 * (modules/project_services). The destination is the function's Cloud Run service
 * by name (modules/functions `service_names`), as Eventarc wants it.
 */

data "google_project" "this" {
  project_id = var.project_id
}

data "google_storage_project_service_account" "gcs" {
  project = var.project_id
}

locals {
  gcs_service_agent    = "serviceAccount:${data.google_storage_project_service_account.gcs.email_address}"
  pubsub_service_agent = "serviceAccount:service-${data.google_project.this.number}@gcp-sa-pubsub.iam.gserviceaccount.com"

  eventarc      = var.route == "eventarc" ? var.storage_triggers : {}
  notifications = var.route == "pubsub" ? var.storage_triggers : {}
}

# --- route "pubsub": Cloud Storage notifications to the trigger topic -----------------

resource "google_pubsub_topic_iam_member" "notification_publisher" {
  for_each = local.notifications

  project = var.project_id
  topic   = var.topic_ids[each.value.topic]
  role    = "roles/pubsub.publisher"
  member  = local.gcs_service_agent
}

resource "google_storage_notification" "notification" {
  for_each = local.notifications

  bucket             = var.buckets[each.value.bucket]
  payload_format     = "JSON_API_V1"
  topic              = var.topic_ids[each.value.topic]
  event_types        = [each.value.notification_event]
  object_name_prefix = each.value.object_prefix

  depends_on = [google_pubsub_topic_iam_member.notification_publisher]
}

# --- route "eventarc": a trigger per function ----------------------------------------

resource "google_service_account" "eventarc" {
  count = length(local.eventarc) > 0 ? 1 : 0

  project      = var.project_id
  account_id   = var.eventarc_invoker_account_id
  display_name = "accelops Eventarc delivery"
  description  = "Identity of the Eventarc triggers that deliver bucket events to the accelops functions."
}

resource "google_project_iam_member" "event_receiver" {
  count = length(local.eventarc) > 0 ? 1 : 0

  project = var.project_id
  role    = "roles/eventarc.eventReceiver"
  member  = "serviceAccount:${google_service_account.eventarc[0].email}"
}

resource "google_cloud_run_v2_service_iam_member" "eventarc_invoker" {
  for_each = local.eventarc

  project  = var.project_id
  location = var.region
  name     = var.function_services[each.key]
  role     = "roles/run.invoker"
  member   = "serviceAccount:${google_service_account.eventarc[0].email}"
}

resource "google_project_iam_member" "gcs_publisher" {
  count = length(local.eventarc) > 0 ? 1 : 0

  project = var.project_id
  role    = "roles/pubsub.publisher"
  member  = local.gcs_service_agent
}

resource "time_sleep" "grants" {
  count = length(local.eventarc) > 0 ? 1 : 0

  create_duration = var.iam_propagation

  triggers = {
    event_receiver = google_project_iam_member.event_receiver[0].id
    gcs_publisher  = google_project_iam_member.gcs_publisher[0].id
    invokers       = join(",", sort([for binding in google_cloud_run_v2_service_iam_member.eventarc_invoker : binding.id]))
  }
}

resource "google_eventarc_trigger" "trigger" {
  for_each = local.eventarc

  project         = var.project_id
  name            = "${var.name_prefix}${replace(each.key, "_", "-")}"
  location        = var.region
  service_account = google_service_account.eventarc[0].email
  labels          = var.labels

  matching_criteria {
    attribute = "type"
    value     = each.value.event_type
  }

  matching_criteria {
    attribute = "bucket"
    value     = var.buckets[each.value.bucket]
  }

  destination {
    cloud_run_service {
      service = var.function_services[each.key]
      region  = var.region
    }
  }

  depends_on = [time_sleep.grants]
}

# Dead-lettering from the trigger's subscription (once its policy names a
# dead-letter topic, see next_steps) needs the Pub/Sub service agent to
# acknowledge there; modules/pubsub lets it publish to the dead-letter topics.
resource "google_pubsub_subscription_iam_member" "dead_letter_subscriber" {
  for_each = local.eventarc

  project      = var.project_id
  subscription = google_eventarc_trigger.trigger[each.key].transport[0].pubsub[0].subscription
  role         = "roles/pubsub.subscriber"
  member       = local.pubsub_service_agent
}
