terraform {
  required_version = ">= 1.5"

  required_providers {
    # The floor is 6.0 (checked against the provider's source and CHANGELOG at v5.0.0,
    # v6.0.0 and v6.50.0, the newest `< 7` allows):
    # - google_cloud_run_v2_service.deletion_protection exists from 6.0.0 on, true
    #   unless set (CHANGELOG 6.0.0); modules/services sets it, which 5.x refuses
    #   as an unsupported argument;
    # - google_cloudfunctions2_function.build_config.service_account: 5.26.0;
    # - no rebuild of every function on every apply: the LOG_EXECUTION_ID diff on
    #   service_config.environment_variables is suppressed from 5.38.0, and the
    #   "inconsistent final plan" on values known only at apply fixed in 5.42.0
    #   (also in 6.0.0).
    google = {
      source  = "hashicorp/google"
      version = ">= 6.0, < 7"
    }
    # google_project_service_identity (modules/project_services) is google-beta only.
    google-beta = {
      source  = "hashicorp/google-beta"
      version = ">= 6.0, < 7"
    }
    # time_sleep: waits for APIs, service agents and IAM grants to settle.
    time = {
      source  = "hashicorp/time"
      version = ">= 0.9, < 1"
    }
    # archive_file: the functions' source archive (modules/function_source).
    archive = {
      source  = "hashicorp/archive"
      version = ">= 2.4, < 3"
    }
  }

  # State in a GCS bucket: terraform init -backend-config=bucket=<state bucket>
  backend "gcs" {
    prefix = "accelops"
  }
}
