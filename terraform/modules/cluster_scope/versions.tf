# Pure computation: no provider, so `terraform apply` runs this module offline
# (tests/unit/test_terraform_scope.py does).
terraform {
  required_version = ">= 1.5"
}
