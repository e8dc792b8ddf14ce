terraform {
  required_version = ">= 1.5"

  required_providers {
    # >= 6.0: see envs/example/versions.tf for why the floor is 6.0.
    google = {
      source  = "hashicorp/google"
      version = ">= 6.0, < 7"
    }
    # archive_file's output_sha256: archive 2.4.0 (CHANGELOG, data_source_archive_file.go).
    archive = {
      source  = "hashicorp/archive"
      version = ">= 2.4, < 3"
    }
  }
}
