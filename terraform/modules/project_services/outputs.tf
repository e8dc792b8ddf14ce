output "enabled_apis" {
  description = "The APIs enabled, once they and the service agents have settled."
  value       = sort([for api in google_project_service.api : api.service])

  depends_on = [time_sleep.settle]
}

output "service_agents" {
  description = "Email of each generated service agent, by service (empty where the API did not return one)."
  value       = { for service, agent in google_project_service_identity.agent : service => agent.email }
}

output "ready" {
  description = "Known once the APIs are enabled, the agents generated and the pause over: depend on it (depends_on = [module.project_services])."
  value       = time_sleep.settle.id
}
