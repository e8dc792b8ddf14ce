variable "project_id" {
  type        = string
  description = "The project to deploy the functions to."
}

variable "region" {
  type        = string
  description = "Region of the functions."
}

variable "functions" {
  type = map(object({
    entry_point        = string
    description        = string
    service_account_id = string
    memory             = string
    cpu                = string
    timeout_seconds    = number
    concurrency        = number
    max_instances      = number
    env                = list(string)
    vpc_egress         = bool
    grants = list(object({
      role   = string
      scope  = string
      why    = string
      target = string
    }))
  }))
  description = "The definition's functions: system.json `functions` (entry point, size, environment variable names, VPC egress, service account id and grants)."
}

variable "name_prefix" {
  type        = string
  description = "Prefix of the function names (a function is named <prefix><name with - for _>)."
  default     = "accelops-"
}

variable "runtime" {
  type        = string
  description = "Python runtime of the functions."
  default     = "python312"

  validation {
    condition     = contains(["python311", "python312"], var.runtime)
    error_message = "runtime must be python311 or python312 (the versions the project supports)."
  }
}

variable "source_bucket" {
  type        = string
  description = "Bucket holding the functions' source archive."
}

variable "source_object" {
  type        = string
  description = "Object name of the source archive in source_bucket (modules/function_source: a zip with main.py, the shared/ package and requirements.txt at its root)."
}

variable "build_service_account" {
  type        = string
  description = "The service account Cloud Build builds the functions as (projects/<project>/serviceAccounts/<email>; modules/function_build)."
}

variable "build_repository" {
  type        = string
  description = "The Artifact Registry repository the built images go to (projects/<project>/locations/<region>/repositories/<id>; modules/function_build)."
}

variable "environment" {
  type        = map(string)
  description = "Values of the environment variables, by name; each function gets the ones its `env` lists."
}

variable "push_invoker_member" {
  type        = string
  description = "IAM member of the service account Pub/Sub pushes as; gets roles/run.invoker on each function."
}

variable "topic_ids" {
  type        = map(string)
  description = "Topic id by topic name, for the functions' publish grants."
}

variable "table_ids" {
  type        = map(string)
  description = "Table id by table name in the metrics dataset, for grants of scope \"table\"."
}

variable "dataset_id" {
  type        = string
  description = "The metrics dataset, for grants of scope \"dataset\"."
}

variable "config_bucket" {
  type        = string
  description = "Bucket holding the team config, for grants of scope \"config_bucket\"."
}

variable "models_bucket" {
  type        = string
  description = "Model artifacts bucket, for grants of scope \"models_bucket\"."
}

variable "releases_bucket" {
  type        = string
  description = "Bucket releases are copied to, for grants of scope \"releases_bucket\"; null: the models bucket."
  default     = null
}

variable "vpc_connector" {
  type        = string
  description = "Serverless VPC Access connector (projects/<p>/locations/<region>/connectors/<name>) in the cluster's VPC, for functions whose definition says vpc_egress; null: they reach Google APIs only."
  default     = null
}

variable "node_service_account" {
  type        = string
  description = "Email of the service account TPU node pools run as; null skips grants of scope \"node_service_account\"."
  default     = null
}

variable "labels" {
  type        = map(string)
  description = "Labels for the functions."
  default     = {}
}
