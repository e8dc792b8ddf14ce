output "route" {
  description = "The route bucket events take (eventarc or pubsub)."
  value       = var.route
}

output "eventarc_triggers" {
  description = "Eventarc trigger id by function name (route eventarc)."
  value       = { for name, t in google_eventarc_trigger.trigger : name => t.id }
}

output "eventarc_subscriptions" {
  description = "The Pub/Sub subscription Eventarc created for each trigger, by function name: give it the definition's retry and dead-letter policy (next_steps)."
  value       = { for name, t in google_eventarc_trigger.trigger : name => t.transport[0].pubsub[0].subscription }
}

output "notifications" {
  description = "Cloud Storage notification id by function name (route pubsub)."
  value       = { for name, n in google_storage_notification.notification : name => n.id }
}

output "eventarc_invoker_email" {
  description = "Email of the identity the Eventarc triggers deliver as; null on the pubsub route."
  value       = one(google_service_account.eventarc[*].email)
}
