variable "project_id" {
  type        = string
  description = "The project of the repository."
}

variable "location" {
  type        = string
  description = "Region of the repository (the services' region keeps pulls local)."
}

variable "repository_id" {
  type        = string
  description = "Repository id."
  default     = "accelops"
}

variable "description" {
  type        = string
  description = "Repository description."
  default     = "accelops service images (dashboard, load generator)"
}

variable "immutable_tags" {
  type        = bool
  description = "Refuse to move a tag once pushed, so a deployed tag always names the same image."
  default     = true
}

variable "kms_key_name" {
  type        = string
  description = "Cloud KMS key to encrypt the repository with; null for Google-managed encryption."
  default     = null
}

variable "labels" {
  type        = map(string)
  description = "Labels for the repository."
  default     = {}
}
