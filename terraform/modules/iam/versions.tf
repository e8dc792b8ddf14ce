terraform {
  required_version = ">= 1.5"

  required_providers {
    # >= 6.0: see envs/example/versions.tf for why the floor is 6.0.
    google = {
      source  = "hashicorp/google"
      version = ">= 6.0, < 7"
    }
  }
}
