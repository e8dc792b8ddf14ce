output "topic_ids" {
  description = "Topic id (projects/<project>/topics/<name>) by topic name."
  value       = { for name, topic in google_pubsub_topic.topic : name => topic.id }
}

output "subscription_ids" {
  description = "Push subscription id by function name."
  value       = { for name, sub in google_pubsub_subscription.push : name => sub.id }
}

output "dead_letter_subscription_ids" {
  description = "Pull subscription that keeps each dead-letter topic's messages, by dead-letter topic name."
  value       = { for name, sub in google_pubsub_subscription.dead_letters : name => sub.id }
}

output "push_invoker_email" {
  description = "Email of the service account the push subscriptions authenticate as."
  value       = google_service_account.push_invoker.email
}

output "push_invoker_member" {
  description = "IAM member of the push service account (for roles/run.invoker on the functions)."
  value       = "serviceAccount:${google_service_account.push_invoker.email}"
}
