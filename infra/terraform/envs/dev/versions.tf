terraform {
  required_version = ">= 1.6.0"

  # Shared state for a team (docs/aws.md, "Sharing state in a team"): uncomment, copy
  # backend.hcl.example to backend.hcl with your state bucket, and initialise with
  # `terraform init -backend-config=backend.hcl` (or TF_CLI_ARGS_init for `trainwise infra`).
  # The settings stay out of this file (a partial configuration), so each team or account
  # names its own bucket; `use_lockfile` locks the state with an S3 lock object (Terraform 1.10+).
  # backend "s3" {}

  required_providers {
    aws = {
      source  = "hashicorp/aws"
      version = "~> 6.0"
    }
    random = {
      source  = "hashicorp/random"
      version = "~> 3.6"
    }
  }
}

provider "aws" {
  region = var.region
  default_tags {
    tags = {
      project     = "trainwise"
      environment = var.environment
      managed-by  = "terraform"
    }
  }
}
