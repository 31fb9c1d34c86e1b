# dev: the rollout function, its artifacts bucket, and the learner/ingestion nodes.

data "aws_caller_identity" "current" {}

data "aws_vpc" "selected" {
  id      = var.vpc_id == "" ? null : var.vpc_id
  default = var.vpc_id == "" ? true : null
}

data "aws_subnets" "selected" {
  filter {
    name   = "vpc-id"
    values = [data.aws_vpc.selected.id]
  }
}

locals {
  name      = "trainwise-${var.environment}"
  subnet_id = var.subnet_id != "" ? var.subnet_id : sort(data.aws_subnets.selected.ids)[0]
  tags      = { project = "trainwise", environment = var.environment }
}

module "artifacts_bucket" {
  source                   = "../../modules/artifacts_bucket"
  bucket_name              = "${local.name}-artifacts-${data.aws_caller_identity.current.account_id}-${var.region}"
  s3_prefix                = var.s3_prefix
  trajectories_expire_days = var.trajectories_expire_days
  force_destroy            = var.force_destroy_bucket
  tags                     = local.tags
}

module "rollout_lambda" {
  source                = "../../modules/rollout_lambda"
  name                  = "${local.name}-rollout"
  package_zip_path      = var.package_zip_path
  layer_zip_path        = var.layer_zip_path
  architecture          = var.lambda_architecture
  memory_mb             = var.lambda_memory_mb
  timeout_s             = var.lambda_timeout_s
  reserved_concurrency  = var.lambda_reserved_concurrency
  log_retention_days    = var.log_retention_days
  artifacts_bucket_name = module.artifacts_bucket.bucket_name
  artifacts_bucket_arn  = module.artifacts_bucket.bucket_arn
  s3_prefix             = var.s3_prefix
  tags                  = local.tags
}

module "ec2_nodes" {
  source                 = "../../modules/ec2_nodes"
  name                   = local.name
  vpc_id                 = data.aws_vpc.selected.id
  subnet_id              = local.subnet_id
  learner_instance_type  = var.learner_instance_type
  learner_count          = var.learner_count
  ingest_instance_type   = var.ingest_instance_type
  ingest_count           = var.ingest_count
  ingest_pools           = var.ingest_pools
  admin_cidrs            = var.admin_cidrs
  dispatcher_cidr        = data.aws_vpc.selected.cidr_block
  trainwise_wheel_sha256 = var.trainwise_wheel_sha256
  caller_policy_arn      = module.rollout_lambda.caller_policy_arn
  artifacts_bucket_arn   = module.artifacts_bucket.bucket_arn
  tags                   = local.tags
}
