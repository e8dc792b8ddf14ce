/**
 * What a new project needs before anything else is created in it: the APIs the
 * deployment uses, the Google-managed service agents it grants roles to, and a
 * pause for both to settle. Every other module of envs/example depends on this
 * one, so a first apply in a new project does not race the APIs it enables.
 *
 * A service agent exists only once its service has generated it, which enabling
 * the API does not always do at once; binding a role to one that does not exist
 * yet fails ("Service account ... does not exist"). generateServiceIdentity
 * creates it and gives it its service-agent role. The Pub/Sub agent signs push
 * tokens and forwards dead letters (modules/pubsub, modules/storage_events); the
 * Eventarc agent manages the trigger's transport and must hold its role before a
 * trigger is created. google_project_service_identity is in the google-beta
 * provider only (registry docs, r/project_service_identity, at v6.0.0 and v6.50.0;
 * source google-beta/services/resourcemanager/resource_project_service_identity.go).
 * The Cloud Storage agent is created by modules/storage_events' data source, which
 * reads it through the storage API.
 */

resource "google_project_service" "api" {
  for_each = toset(var.activate_apis)

  project            = var.project_id
  service            = each.key
  disable_on_destroy = false
}

resource "google_project_service_identity" "agent" {
  provider = google-beta
  for_each = toset(var.service_agents)

  project = var.project_id
  service = each.key

  depends_on = [google_project_service.api]

  lifecycle {
    precondition {
      condition     = contains(var.activate_apis, each.key)
      error_message = "The service agent of ${each.key} is generated here, but ${each.key} is not in activate_apis."
    }
  }
}

# A newly enabled API and a newly generated agent take a while to be usable:
# Eventarc answers "Permission denied while using the Eventarc Service Agent ...
# it may take a few minutes" to a trigger created right after. The pause runs
# again whenever the set of APIs or agents changes (triggers).
resource "time_sleep" "settle" {
  create_duration = var.settle_duration

  triggers = {
    apis   = join(",", sort([for api in google_project_service.api : api.service]))
    agents = join(",", sort([for agent in google_project_service_identity.agent : agent.service]))
  }
}
