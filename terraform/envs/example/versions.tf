terraform {
  required_version = ">= 1.5"

  required_providers {
    google = {
      source  = "hashicorp/google"
      version = ">= 5.0, < 7"
    }
  }

  # State in a GCS bucket: terraform init -backend-config=bucket=<state bucket>
  backend "gcs" {
    prefix = "accelops"
  }
}
