variable "region" {
  description = "AWS region for every resource."
  type        = string
  default     = "us-east-1"
}

variable "environment" {
  description = "Environment name, part of every resource name."
  type        = string
  default     = "dev"
}

variable "package_zip_path" {
  description = "Function zip; `trainwise infra plan|apply` builds it and passes its absolute path."
  type        = string
  default     = "../../../../build/rollout.zip"
}

variable "layer_zip_path" {
  description = "numpy+gymnasium layer zip (`python -m serverless.lambda_package --layer`); empty for no layer."
  type        = string
  default     = "../../../../build/rollout-deps-layer-x86_64.zip"
}

variable "lambda_architecture" {
  description = "x86_64 or arm64 (the layer must be built for the same one)."
  type        = string
  default     = "x86_64"
}

variable "lambda_memory_mb" {
  description = "Initial memory of the rollout function (1769 MB is one vCPU); the tuner changes it."
  type        = number
  default     = 1769
}

variable "lambda_timeout_s" {
  description = "Rollout function timeout in seconds."
  type        = number
  default     = 300
}

variable "lambda_reserved_concurrency" {
  description = "Most actors that can run at once; also caps the spend of a runaway run."
  type        = number
  default     = 20
}

variable "log_retention_days" {
  description = "Retention of the function's logs."
  type        = number
  default     = 14
}

variable "s3_prefix" {
  description = "Key prefix of the rollout objects in the artifacts bucket."
  type        = string
  default     = "rollouts"
}

variable "trajectories_expire_days" {
  description = "Lifecycle backstop for trajectories left in S3."
  type        = number
  default     = 3
}

variable "force_destroy_bucket" {
  description = "dev: let destroy remove a non-empty bucket."
  type        = bool
  default     = true
}

variable "vpc_id" {
  description = "VPC for the nodes; empty uses the account's default VPC."
  type        = string
  default     = ""
}

variable "subnet_id" {
  description = "Subnet for the nodes; empty uses the first subnet of the VPC."
  type        = string
  default     = ""
}

variable "learner_instance_type" {
  description = "Learner instance type."
  type        = string
  default     = "c7i.large"
}

variable "learner_count" {
  description = "Learner instances (0 to run the learner on your own machine)."
  type        = number
  default     = 1
}

variable "ingest_instance_type" {
  description = "Ingestion node instance type."
  type        = string
  default     = "c7i.large"
}

variable "ingest_count" {
  description = "Ingestion nodes."
  type        = number
  default     = 1
}

variable "ingest_pools" {
  description = "Ingestion nodes per instance type, from `trainwise ingest cluster --write-tfvars`; empty: ingest_instance_type x ingest_count."
  type        = list(object({ instance_type = string, count = number }))
  default     = []
}

variable "admin_cidrs" {
  description = "Narrow CIDRs allowed to SSH to the nodes; empty: none (use SSM Session Manager)."
  type        = list(string)
  default     = []
}
