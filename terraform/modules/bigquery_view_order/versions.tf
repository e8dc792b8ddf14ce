# Pure computation: no provider, so `terraform plan` runs this module offline
# (tests/unit/test_terraform_views.py does).
terraform {
  required_version = ">= 1.5"
}
