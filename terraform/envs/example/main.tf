/**
 * accelops in one project: every module composed from the one definition.
 *
 * terraform/generated/system.json (written by `accelops deploy generate` from
 * shared/deployment/system.py) is read once here and its parts handed to the
 * modules: no topic, subscription, retry policy, size, service account or grant
 * is written in HCL.
 *
 * A first apply in a new project works in one run: modules/project_services
 * enables the APIs, generates the service agents and waits for them before
 * anything else is created; grants that a creation relies on are waited for where
 * they are made (modules/function_build, modules/storage_events); the functions'
 * source archive is built from this repository and uploaded by Terraform
 * (modules/function_source). Only the service images are pushed between two
 * applies (terraform/README.md, "Deploying").
 */

# Requests name this project as their quota project (X-Goog-User-Project): with user
# credentials from gcloud, which carry none, google_project_service and others
# fail otherwise (provider reference, user_project_override: "it is recommended to
# set this property to true"). The caller needs serviceusage.services.use here.
provider "google" {
  project               = var.project_id
  region                = var.region
  user_project_override = true
  billing_project       = coalesce(var.billing_project, var.project_id)
}

provider "google-beta" {
  project               = var.project_id
  region                = var.region
  user_project_override = true
  billing_project       = coalesce(var.billing_project, var.project_id)
}

locals {
  generated_dir   = "${path.module}/../../generated"
  repository_root = "${path.module}/../../.."
  system          = jsondecode(file("${local.generated_dir}/system.json"))

  # The team config uploaded as ACCELOPS_CONFIG; Terraform reads from it what the
  # grants depend on (the node service account, the clusters pool_schedule acts on).
  config_file = coalesce(var.config_file, "${path.module}/accelops.yaml")
  config      = yamldecode(file(local.config_file))

  cluster_name     = var.create_cluster ? module.gke[0].name : var.cluster_name
  cluster_location = var.create_cluster ? module.gke[0].location : try(coalesce(var.cluster_location, var.zone), null)

  # The configuration contract (DESIGN.md): each function and service gets the
  # variables its definition lists.
  environment = {
    ACCELOPS_CONFIG   = module.buckets.config_uri
    ACCELOPS_PROJECT  = var.project_id
    ACCELOPS_LOCATION = local.cluster_location
    ACCELOPS_CLUSTER  = local.cluster_name
    # Empty: the code's in-cluster default, which Cloud Run cannot resolve (see
    # saxml_proxy_url).
    ACCELOPS_SAXML_PROXY = var.saxml_proxy_url == null ? "" : var.saxml_proxy_url
    # The audiences the jobs API accepts ID tokens for: its own URL (the one
    # `jobs_api_url` outputs; clients mint tokens for it) and any custom audience.
    ACCELOPS_JOBS_API_AUDIENCE = join(",", concat([module.services.deterministic_urls["jobs_api"]], var.jobs_api_audiences))
  }

  # Who may call each service; the jobs API's callers are its own variable.
  service_invokers = merge(var.service_invokers, {
    jobs_api = distinct(concat(lookup(var.service_invokers, "jobs_api", []), var.jobs_api_invokers))
  })

  # A service without a tag has no image: modules/services says so at plan.
  images = {
    for name in keys(local.system.services) :
    name => "${module.artifact_registry.url}/${name}:${var.image_tags[name]}" if contains(keys(var.image_tags), name)
  }

  labels = merge({ app = "accelops" }, var.labels)
}

# Fail at plan, with the reason, when the cluster to act on is not named.
resource "terraform_data" "inputs" {
  lifecycle {
    precondition {
      condition     = (var.create_cluster || var.cluster_name != null) && (var.cluster_location != null || var.zone != null)
      error_message = "Name the existing cluster (cluster_name, and cluster_location or zone), or set create_cluster = true with a cluster_location or zone."
    }
  }
}

# Warn (not fail) at plan: Triton serving works without these; Saxml rollouts
# cannot be observed, and are rolled back when they time out.
check "saxml_reach" {
  assert {
    condition     = var.saxml_team_namespace == null || (var.vpc_connector != null && var.saxml_proxy_url != null)
    error_message = "saxml_team_namespace is set but vpc_connector or saxml_proxy_url is not: reconcile_models cannot reach the Saxml HTTP proxy (the sax-proxy Service's internal load balancer) from Cloud Run."
  }
}

# Warn (not fail) at plan: pool_schedule acts on clusters in other projects, where no
# binding made here reaches.
check "pool_schedule_reach" {
  assert {
    condition     = length(module.cluster_scope.foreign_clusters) == 0
    error_message = "pool_schedule.clusters names clusters of other projects (${join(", ", module.cluster_scope.foreign_clusters)}): no binding made here reaches them; grant the pool_schedule function's account (output service_account_emails) container.clusters.get and container.clusters.update in those projects, on those clusters."
  }
}

# The APIs were enabled here before modules/project_services existed.
moved {
  from = google_project_service.api
  to   = module.project_services.google_project_service.api
}

module "project_services" {
  source = "../../modules/project_services"

  project_id    = var.project_id
  activate_apis = var.activate_apis
}

module "gke" {
  source = "../../modules/gke"
  count  = var.create_cluster ? 1 : 0

  project_id           = var.project_id
  name                 = coalesce(var.cluster_name, "accelops")
  location             = coalesce(var.cluster_location, var.zone)
  region               = var.region
  enable_private_nodes = var.enable_private_nodes
  labels               = local.labels

  depends_on = [module.project_services]
}

# Which clusters the GKE roles hold on, and the node service account TPU pools run
# as: the team config must name one (it fails at plan otherwise, with the reason).
module "cluster_scope" {
  source = "../../modules/cluster_scope"

  project_id                   = var.project_id
  cluster_name                 = local.cluster_name
  cluster_location             = local.cluster_location
  node_service_account         = try(local.config.slices.node_service_account, null)
  created_node_service_account = var.create_cluster ? module.gke[0].node_service_account_email : null
  pool_schedule_clusters       = try(coalescelist(local.config.pool_schedule.clusters, []), [])
}

module "iam" {
  source = "../../modules/iam"

  project_id   = var.project_id
  custom_roles = local.system.custom_roles
  members      = merge(module.functions.service_account_members, module.services.service_account_members)
  grants = merge(
    { for name, f in local.system.functions : name => f.grants },
    { for name, s in local.system.services : name => s.grants },
  )
  clusters   = module.cluster_scope.clusters
  conditions = module.cluster_scope.conditions

  depends_on = [module.project_services]
}

# Applicable on its own (terraform apply -target=module.buckets), with the APIs.
module "buckets" {
  source = "../../modules/buckets"

  project_id  = var.project_id
  location    = var.region
  config_file = local.config_file
  labels      = local.labels

  depends_on = [module.project_services]
}

# Applicable on its own (-target=module.artifact_registry): the service images are
# pushed here before the services are created.
module "artifact_registry" {
  source = "../../modules/artifact_registry"

  project_id = var.project_id
  location   = var.region
  labels     = local.labels

  depends_on = [module.project_services]
}

# The functions' source, zipped from this repository and uploaded under its hash.
# No depends_on: the archive is built, and its name known, at plan.
module "function_source" {
  source = "../../modules/function_source"

  bucket            = module.buckets.source_bucket
  repository_root   = local.repository_root
  requirements_file = "${local.generated_dir}/function_requirements.txt"
  output_path       = "${path.root}/.terraform/accelops/function-source.zip"
}

# The identity and image repository of the functions' builds.
module "function_build" {
  source = "../../modules/function_build"

  project_id       = var.project_id
  region           = var.region
  build_account_id = local.system.function_build_account_id
  source_bucket    = module.buckets.source_bucket
  labels           = local.labels

  depends_on = [module.project_services]
}

module "bigquery" {
  source = "../../modules/bigquery"

  project_id                = var.project_id
  location                  = var.bigquery_location
  dataset_id                = local.system.bigquery.dataset_id
  tables                    = local.system.bigquery.tables
  views                     = local.system.bigquery.views
  generated_dir             = local.generated_dir
  partition_expiration_days = var.partition_expiration_days
  deletion_protection       = var.deletion_protection
  labels                    = local.labels

  depends_on = [module.project_services]
}

module "pubsub" {
  source = "../../modules/pubsub"

  project_id              = var.project_id
  topics                  = local.system.topics
  functions               = local.system.functions
  push_invoker_account_id = local.system.push_invoker_account_id
  push_endpoints          = module.functions.urls
  labels                  = local.labels

  depends_on = [module.project_services]
}

module "functions" {
  source = "../../modules/functions"

  project_id            = var.project_id
  region                = var.region
  functions             = local.system.functions
  runtime               = var.function_runtime
  source_bucket         = module.buckets.source_bucket
  source_object         = module.function_source.object
  build_service_account = module.function_build.service_account
  build_repository      = module.function_build.repository
  environment           = local.environment
  push_invoker_member   = module.pubsub.push_invoker_member
  topic_ids             = module.pubsub.topic_ids
  table_ids             = module.bigquery.table_ids
  dataset_id            = module.bigquery.dataset_id
  config_bucket         = module.buckets.config_bucket
  models_bucket         = module.buckets.models_bucket
  releases_bucket       = var.releases_bucket
  vpc_connector         = var.vpc_connector
  node_service_account  = module.cluster_scope.node_service_account
  labels                = local.labels

  depends_on = [module.project_services]
}

# Uploads to the models bucket reach deploy_model (route: var.model_upload_route).
module "storage_events" {
  source = "../../modules/storage_events"

  project_id                  = var.project_id
  region                      = var.region
  route                       = var.model_upload_route
  storage_triggers            = local.system.storage_triggers
  buckets                     = { models_bucket = module.buckets.models_bucket }
  topic_ids                   = module.pubsub.topic_ids
  function_services           = module.functions.service_names
  eventarc_invoker_account_id = local.system.eventarc_invoker_account_id
  labels                      = local.labels

  depends_on = [module.project_services]
}

# The identities Triton, Saxml and the load generator on GKE run as (Workload Identity).
module "workload_identity" {
  source = "../../modules/workload_identity"

  project_id = var.project_id
  identities = local.system.serving.workload_identities
  namespaces = {
    serving_namespace = local.system.serving.namespace
    saxml_namespace   = var.saxml_team_namespace
  }
  topic_ids       = module.pubsub.topic_ids
  config_bucket   = module.buckets.config_bucket
  models_bucket   = module.buckets.models_bucket
  releases_bucket = var.releases_bucket
  sax_bucket      = module.buckets.sax_bucket

  # The Workload Identity pool exists once a cluster with Workload Identity does.
  depends_on = [module.project_services, module.gke]
}

module "services" {
  source = "../../modules/services"

  project_id    = var.project_id
  region        = var.region
  services      = local.system.services
  images        = local.images
  args          = var.service_args
  environment   = local.environment
  invokers      = local.service_invokers
  topic_ids     = module.pubsub.topic_ids
  dataset_id    = module.bigquery.dataset_id
  config_bucket = module.buckets.config_bucket
  models_bucket = module.buckets.models_bucket
  labels        = local.labels

  depends_on = [module.project_services]
}

module "scheduler" {
  source = "../../modules/scheduler"

  project_id = var.project_id
  region     = var.region
  jobs       = local.system.scheduler_jobs
  topic_ids  = module.pubsub.topic_ids

  depends_on = [module.project_services]
}

module "log_sink" {
  source = "../../modules/log_sink"

  project_id   = var.project_id
  sinks        = local.system.log_sinks
  topic_ids    = module.pubsub.topic_ids
  cluster_name = local.cluster_name

  depends_on = [module.project_services]
}
