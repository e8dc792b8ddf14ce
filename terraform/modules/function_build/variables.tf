variable "project_id" {
  type        = string
  description = "The project the functions are built in."
}

variable "region" {
  type        = string
  description = "Region of the functions, and of their image repository."
}

variable "build_account_id" {
  type        = string
  description = "Account id of the build identity: system.json `function_build_account_id`."
}

variable "source_bucket" {
  type        = string
  description = "Bucket holding the functions' source archive (the build reads it)."
}

variable "repository_id" {
  type        = string
  description = "Id of the Artifact Registry repository the function images go to."
  default     = "accelops-function-images"
}

variable "kms_key_name" {
  type        = string
  description = "Customer-managed key for the image repository; null: Google-managed encryption."
  default     = null
}

variable "iam_propagation" {
  type        = string
  description = "How long the functions wait for the build identity's grants to take effect (a Go duration)."
  default     = "60s"
}

variable "labels" {
  type        = map(string)
  description = "Labels for the repository."
  default     = {}
}
