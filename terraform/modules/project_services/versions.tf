terraform {
  required_version = ">= 1.5"

  required_providers {
    # >= 6.0: see envs/example/versions.tf for why the floor is 6.0.
    google = {
      source  = "hashicorp/google"
      version = ">= 6.0, < 7"
    }
    # google_project_service_identity exists only in google-beta (at 6.0.0 and 6.50.0).
    google-beta = {
      source  = "hashicorp/google-beta"
      version = ">= 6.0, < 7"
    }
    # time_sleep with create_duration and triggers: time v0.9.0 docs/resources/sleep.md.
    time = {
      source  = "hashicorp/time"
      version = ">= 0.9, < 1"
    }
  }
}
