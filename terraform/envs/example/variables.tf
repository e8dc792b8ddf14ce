variable "project_id" {
  type        = string
  description = "The project to deploy accelops to (ACCELOPS_PROJECT)."
}

variable "region" {
  type        = string
  description = "Region of the functions, services, buckets, scheduler jobs and image repository."
  default     = "us-central1"
}

variable "zone" {
  type        = string
  description = "Zone of the cluster when cluster_location is not given (a zone that offers the TPU types the teams use)."
  default     = null
}

variable "create_cluster" {
  type        = bool
  description = "Create a cluster with modules/gke; false uses the existing cluster named by cluster_name and cluster_location."
  default     = false
}

variable "cluster_name" {
  type        = string
  description = "Name of the GKE cluster to act on (ACCELOPS_CLUSTER); for a created cluster, its name (default \"accelops\")."
  default     = null
}

variable "cluster_location" {
  type        = string
  description = "Location of the cluster (ACCELOPS_LOCATION): a region or a zone; null uses zone."
  default     = null
}

variable "enable_private_nodes" {
  type        = bool
  description = "Private nodes for a created cluster."
  default     = true
}

variable "billing_project" {
  type        = string
  description = "Quota project of the provider's requests (X-Goog-User-Project); null: project_id. The caller needs serviceusage.services.use on it."
  default     = null
}

variable "config_file" {
  type        = string
  description = "Local path of the team config YAML uploaded as ACCELOPS_CONFIG; null uses accelops.yaml next to this file. Terraform reads slices.node_service_account (required: the account TPU node pools run as) and pool_schedule.clusters from it."
  default     = null
}

variable "function_runtime" {
  type        = string
  description = "Python runtime of the functions (python311 or python312)."
  default     = "python312"
}

variable "image_tags" {
  type        = map(string)
  description = "Image tag of each service, by service name (images are <repository>/<service>:<tag>; tags are immutable, so use a release tag, not latest)."
}

variable "service_args" {
  type        = map(list(string))
  description = "Container arguments by service name (e.g. the load generator's Locust flags)."
  default     = {}
}

variable "service_invokers" {
  type        = map(list(string))
  description = "IAM members allowed to call each Cloud Run service, by service name."
  default     = {}
}

variable "jobs_api_invokers" {
  type        = list(string)
  description = "IAM members allowed to call the jobs API (roles/run.invoker), e.g. [\"group:ml-researchers@example.com\", \"serviceAccount:ci@my-project.iam.gserviceaccount.com\"]. Cover every e-mail the team config's teams[*].members and jobs_api.admins name: the service maps callers to teams from those."
  default     = []

  validation {
    condition     = !contains(var.jobs_api_invokers, "allUsers") && !contains(var.jobs_api_invokers, "allAuthenticatedUsers")
    error_message = "The jobs API is IAM-authenticated: allUsers and allAuthenticatedUsers are refused."
  }
}

variable "jobs_api_audiences" {
  type        = list(string)
  description = "ID token audiences the jobs API accepts besides its own URL (e.g. a custom audience your clients mint tokens for)."
  default     = []
}

variable "model_upload_route" {
  type        = string
  description = "How uploads to the models bucket reach deploy_model: \"eventarc\" (an Eventarc trigger; give its subscription the definition's retry policy with the command next_steps prints) or \"pubsub\" (Cloud Storage notifications for the definition's object prefix to deploy_model's trigger topic and its push subscription)."
  default     = "eventarc"

  validation {
    condition     = contains(["eventarc", "pubsub"], var.model_upload_route)
    error_message = "model_upload_route must be \"eventarc\" or \"pubsub\"."
  }
}

variable "releases_bucket" {
  type        = string
  description = "An existing bucket deploy_model copies releases to (the team config's serving.releases_bucket); null: the models bucket, under releases/."
  default     = null
}

variable "saxml_team_namespace" {
  type        = string
  description = "Namespace of the team config's serving.saxml_team (Saxml model servers run there as the saxml service account); null when Saxml is not used."
  default     = null
}

variable "vpc_connector" {
  type        = string
  description = "Serverless VPC Access connector in the cluster's VPC and the functions' region (projects/<p>/locations/<region>/connectors/<name>), through which reconcile_models reaches the Saxml HTTP proxy; null when Saxml is not used."
  default     = null
}

variable "saxml_proxy_url" {
  type        = string
  description = "URL of the Saxml HTTP proxy as reconcile_models reaches it (ACCELOPS_SAXML_PROXY): http://<sax-proxy Service's internal load-balancer address>:8888, known once the overlay is applied; null when Saxml is not used."
  default     = null
}

variable "bigquery_location" {
  type        = string
  description = "Location of the metrics dataset (the team config's metrics.location)."
  default     = "US"
}

variable "partition_expiration_days" {
  type        = number
  description = "Days after which request partitions are dropped (the team config's metrics.partition_expiration_days); null keeps them."
  default     = null
}

variable "deletion_protection" {
  type        = bool
  description = "Refuse to destroy the metrics tables."
  default     = true
}

variable "labels" {
  type        = map(string)
  description = "Labels added to every labelled resource."
  default     = {}
}

variable "activate_apis" {
  type        = list(string)
  description = "APIs the deployment uses, enabled in the project."
  default = [
    "artifactregistry.googleapis.com",
    "bigquery.googleapis.com",
    "cloudbuild.googleapis.com",
    "cloudresourcemanager.googleapis.com",
    "cloudfunctions.googleapis.com",
    "cloudscheduler.googleapis.com",
    "compute.googleapis.com",
    "container.googleapis.com",
    "eventarc.googleapis.com",
    "iam.googleapis.com",
    "logging.googleapis.com",
    "pubsub.googleapis.com",
    "run.googleapis.com",
    "storage.googleapis.com",
  ]
}
