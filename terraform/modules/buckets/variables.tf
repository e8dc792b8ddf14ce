variable "project_id" {
  type        = string
  description = "The project of the buckets."
}

variable "location" {
  type        = string
  description = "Location of the buckets (a region near the functions and the cluster)."
}

variable "name_prefix" {
  type        = string
  description = "Prefix of the bucket names (<prefix>-config, -function-source, -models, -sax); null uses <project_id>-accelops (the name `accelops manifests render` assumes without --sax-bucket)."
  default     = null
}

variable "config_file" {
  type        = string
  description = "Local path of the team config YAML uploaded to the config bucket."
}

variable "config_object_name" {
  type        = string
  description = "Object name of the team config in the config bucket."
  default     = "accelops.yaml"
}

variable "noncurrent_version_days" {
  type        = number
  description = "Days a replaced or deleted object version is kept before it is deleted."
  default     = 30
}

variable "sax_noncurrent_version_days" {
  type        = number
  description = "Days a replaced version of the Sax cell's state is kept (the admin server rewrites it as it runs)."
  default     = 7
}

variable "source_retention_days" {
  type        = number
  description = "Days after which function source archives are deleted (upload a fresh one before redeploying an older release); null keeps them."
  default     = 180
}

variable "force_destroy" {
  type        = bool
  description = "Let `terraform destroy` delete non-empty buckets."
  default     = false
}

variable "labels" {
  type        = map(string)
  description = "Labels for the buckets."
  default     = {}
}
