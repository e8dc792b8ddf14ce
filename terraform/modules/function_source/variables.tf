variable "bucket" {
  type        = string
  description = "The function source bucket (modules/buckets `source_bucket`)."
}

variable "repository_root" {
  type        = string
  description = "The repository's root directory (envs/example passes ../../..)."
}

variable "entry_module" {
  type        = string
  description = "Path, under repository_root, of the module exporting the entry points; it becomes main.py."
  default     = "functions/main.py"
}

variable "package" {
  type        = string
  description = "The package, under repository_root, the entry points import (its .py files and py.typed go in)."
  default     = "shared"
}

variable "requirements_file" {
  type        = string
  description = "The requirements.txt to put at the archive's root (terraform/generated/function_requirements.txt)."
}

variable "object_prefix" {
  type        = string
  description = "Prefix of the object name; the name is <prefix><sha256 of the archive>.zip."
  default     = "functions/"
}

variable "output_path" {
  type        = string
  description = "Where the archive is written locally; it must still be there at apply (plan and apply on one machine, or keep the file)."
}
