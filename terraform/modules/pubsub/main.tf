/**
 * Topics, and one push subscription per function with the function's retry and
 * dead-letter policy: delivery is ours, not Eventarc's, so the policy written in
 * the definition is the policy that runs. Dead letters are kept on a pull
 * subscription of each dead-letter topic, where they can be read and replayed.
 */

data "google_project" "this" {
  project_id = var.project_id
}

locals {
  # The Pub/Sub service agent forwards dead letters and signs the push tokens.
  pubsub_service_agent = "serviceAccount:service-${data.google_project.this.number}@gcp-sa-pubsub.iam.gserviceaccount.com"

  dead_letter_topics = toset([for f in values(var.functions) : f.dead_letter_topic])
}

resource "google_pubsub_topic" "topic" {
  #checkov:skip=CKV_GCP_83:Google-managed encryption; a customer-managed key is optional (var.kms_key_name) and needs a key ring this module does not own.
  for_each = toset(var.topics)

  project      = var.project_id
  name         = each.key
  labels       = var.labels
  kms_key_name = var.kms_key_name
}

# The identity Pub/Sub pushes as: its OIDC token is what the functions' Cloud Run
# services accept (roles/run.invoker, granted in modules/functions).
resource "google_service_account" "push_invoker" {
  project      = var.project_id
  account_id   = var.push_invoker_account_id
  display_name = "accelops Pub/Sub push"
  description  = "Identity of the Pub/Sub push subscriptions that deliver to the accelops functions."
}

resource "google_service_account_iam_member" "push_token_creator" {
  service_account_id = google_service_account.push_invoker.name
  role               = "roles/iam.serviceAccountTokenCreator"
  member             = local.pubsub_service_agent
}

resource "google_pubsub_subscription" "push" {
  for_each = var.functions

  project              = var.project_id
  name                 = each.value.subscription
  topic                = google_pubsub_topic.topic[each.value.trigger_topic].id
  ack_deadline_seconds = each.value.ack_deadline_seconds
  labels               = var.labels

  push_config {
    push_endpoint = var.push_endpoints[each.key]

    oidc_token {
      service_account_email = google_service_account.push_invoker.email
      audience              = var.push_endpoints[each.key]
    }
  }

  retry_policy {
    minimum_backoff = "${each.value.minimum_backoff_seconds}s"
    maximum_backoff = "${each.value.maximum_backoff_seconds}s"
  }

  dead_letter_policy {
    dead_letter_topic     = google_pubsub_topic.topic[each.value.dead_letter_topic].id
    max_delivery_attempts = each.value.max_delivery_attempts
  }

  # Never expire: an idle week must not delete the subscription.
  expiration_policy {
    ttl = ""
  }

  depends_on = [google_service_account_iam_member.push_token_creator]
}

# Dead-lettering needs the service agent to publish to the dead-letter topic and
# to subscribe (acknowledge the forwarded message) on the source subscription.
resource "google_pubsub_topic_iam_member" "dead_letter_publisher" {
  for_each = local.dead_letter_topics

  project = var.project_id
  topic   = google_pubsub_topic.topic[each.key].id
  role    = "roles/pubsub.publisher"
  member  = local.pubsub_service_agent
}

resource "google_pubsub_subscription_iam_member" "dead_letter_subscriber" {
  for_each = var.functions

  project      = var.project_id
  subscription = google_pubsub_subscription.push[each.key].id
  role         = "roles/pubsub.subscriber"
  member       = local.pubsub_service_agent
}

# Keeps what was dead-lettered (a topic without a subscription drops it).
resource "google_pubsub_subscription" "dead_letters" {
  for_each = local.dead_letter_topics

  project                    = var.project_id
  name                       = "${each.key}${var.dead_letter_subscription_suffix}"
  topic                      = google_pubsub_topic.topic[each.key].id
  message_retention_duration = var.dead_letter_retention
  retain_acked_messages      = false
  ack_deadline_seconds       = var.dead_letter_ack_deadline_seconds
  labels                     = var.labels

  expiration_policy {
    ttl = ""
  }
}
