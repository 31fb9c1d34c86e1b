variable "region" {
  description = "AWS region for every resource."
  type        = string
  default     = "us-east-1"
  validation {
    condition     = can(regex("^[a-z]{2}(-[a-z]+)+-[0-9]+$", var.region))
    error_message = "region must be an AWS region name such as us-east-1 or eu-west-1."
  }
}

variable "environment" {
  description = "Environment name, part of every resource name."
  type        = string
  default     = "dev"
  validation {
    condition     = can(regex("^[a-z]([a-z0-9-]{0,13}[a-z0-9])?$", var.environment))
    error_message = "environment must be 1 to 15 lowercase letters, digits or hyphens, starting with a letter and not ending with a hyphen (it is part of the bucket name, at most 63 characters)."
  }
}

variable "package_zip_path" {
  description = "Function zip; `trainwise infra plan|apply` builds it and passes its absolute path."
  type        = string
  default     = "../../../../build/rollout.zip"
  validation {
    condition     = endswith(var.package_zip_path, ".zip")
    error_message = "package_zip_path must name a .zip file."
  }
}

variable "layer_zip_path" {
  description = "numpy+gymnasium layer zip (`python -m serverless.lambda_package --layer`); empty for no layer."
  type        = string
  default     = "../../../../build/rollout-deps-layer-x86_64.zip"
  validation {
    condition     = var.layer_zip_path == "" || endswith(var.layer_zip_path, ".zip")
    error_message = "layer_zip_path must name a .zip file, or be empty for no layer."
  }
}

variable "lambda_architecture" {
  description = "x86_64 or arm64 (the layer must be built for the same one)."
  type        = string
  default     = "x86_64"
  validation {
    condition     = contains(["x86_64", "arm64"], var.lambda_architecture)
    error_message = "lambda_architecture must be x86_64 or arm64."
  }
}

variable "lambda_memory_mb" {
  description = "Initial memory of the rollout function (1769 MB is one vCPU); the tuner changes it."
  type        = number
  default     = 1769
  validation {
    condition     = var.lambda_memory_mb >= 128 && var.lambda_memory_mb <= 10240 && floor(var.lambda_memory_mb) == var.lambda_memory_mb
    error_message = "lambda_memory_mb must be a whole number of MB from 128 to 10240."
  }
}

variable "lambda_timeout_s" {
  description = "Rollout function timeout in seconds."
  type        = number
  default     = 300
  validation {
    condition     = var.lambda_timeout_s >= 1 && var.lambda_timeout_s <= 900 && floor(var.lambda_timeout_s) == var.lambda_timeout_s
    error_message = "lambda_timeout_s must be a whole number of seconds from 1 to 900."
  }
}

variable "lambda_reserved_concurrency" {
  description = "Most actors that can run at once; also caps the spend of a runaway run."
  type        = number
  default     = 20
  validation {
    condition     = (var.lambda_reserved_concurrency == -1 || var.lambda_reserved_concurrency >= 0) && floor(var.lambda_reserved_concurrency) == var.lambda_reserved_concurrency
    error_message = "lambda_reserved_concurrency must be -1 (unreserved) or a whole number of at least 0."
  }
}

variable "log_retention_days" {
  description = "Retention of the function's logs."
  type        = number
  default     = 14
  validation {
    condition     = contains([1, 3, 5, 7, 14, 30, 60, 90, 120, 150, 180, 365, 400, 545, 731, 1096, 1827, 2192, 2557, 2922, 3288, 3653], var.log_retention_days)
    error_message = "log_retention_days must be one of CloudWatch's retention periods: 1, 3, 5, 7, 14, 30, 60, 90, 120, 150, 180, 365, 400, 545, 731, 1096, 1827, 2192, 2557, 2922, 3288 or 3653."
  }
}

variable "s3_prefix" {
  description = "Key prefix of the rollout objects in the artifacts bucket."
  type        = string
  default     = "rollouts"
  validation {
    condition     = can(regex("^[A-Za-z0-9_.-]+(/[A-Za-z0-9_.-]+)*$", var.s3_prefix))
    error_message = "s3_prefix must be one or more path segments of letters, digits, '_', '.' or '-', joined by '/' (no leading or trailing '/')."
  }
}

variable "trajectories_expire_days" {
  description = "Lifecycle backstop for trajectories left in S3."
  type        = number
  default     = 3
  validation {
    condition     = var.trajectories_expire_days >= 1 && floor(var.trajectories_expire_days) == var.trajectories_expire_days
    error_message = "trajectories_expire_days must be a whole number of days, at least 1."
  }
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
  validation {
    condition     = var.vpc_id == "" || can(regex("^vpc-[0-9a-f]{8}([0-9a-f]{9})?$", var.vpc_id))
    error_message = "vpc_id must be empty (the default VPC) or a VPC id such as vpc-0123456789abcdef0."
  }
}

variable "subnet_id" {
  description = "Subnet for the nodes; empty uses the first subnet of the VPC."
  type        = string
  default     = ""
  validation {
    condition     = var.subnet_id == "" || can(regex("^subnet-[0-9a-f]{8}([0-9a-f]{9})?$", var.subnet_id))
    error_message = "subnet_id must be empty (the VPC's first subnet) or a subnet id such as subnet-0123456789abcdef0."
  }
}

variable "learner_instance_type" {
  description = "Learner instance type."
  type        = string
  default     = "c7i.large"
  validation {
    condition     = can(regex("^[a-z][a-z0-9-]*\\.[a-z0-9]+$", var.learner_instance_type))
    error_message = "learner_instance_type must be an EC2 instance type such as c7i.large."
  }
}

variable "learner_count" {
  description = "Learner instances (0 to run the learner on your own machine)."
  type        = number
  default     = 1
  validation {
    condition     = var.learner_count >= 0 && floor(var.learner_count) == var.learner_count
    error_message = "learner_count must be a whole number, at least 0."
  }
}

variable "ingest_instance_type" {
  description = "Ingestion node instance type."
  type        = string
  default     = "c7i.large"
  validation {
    condition     = can(regex("^[a-z][a-z0-9-]*\\.[a-z0-9]+$", var.ingest_instance_type))
    error_message = "ingest_instance_type must be an EC2 instance type such as c7i.large."
  }
}

variable "ingest_count" {
  description = "Ingestion nodes."
  type        = number
  default     = 1
  validation {
    condition     = var.ingest_count >= 0 && floor(var.ingest_count) == var.ingest_count
    error_message = "ingest_count must be a whole number, at least 0."
  }
}

variable "ingest_pools" {
  description = "Ingestion nodes per instance type, from `trainwise ingest cluster --write-tfvars`; empty: ingest_instance_type x ingest_count."
  type        = list(object({ instance_type = string, count = number }))
  default     = []
  validation {
    condition     = alltrue([for p in var.ingest_pools : can(regex("^[a-z][a-z0-9-]*\\.[a-z0-9]+$", p.instance_type)) && p.count >= 1 && floor(p.count) == p.count])
    error_message = "each of ingest_pools needs an EC2 instance type such as c7i.large and a whole count of at least 1."
  }
}

variable "admin_cidrs" {
  description = "Narrow CIDRs allowed to SSH to the nodes; empty: none (use SSM Session Manager)."
  type        = list(string)
  default     = []
  validation {
    condition     = alltrue([for c in var.admin_cidrs : can(cidrhost(c, 0)) && tonumber(split("/", c)[1]) >= 16])
    error_message = "admin_cidrs must be valid CIDRs of /16 or narrower; a world-open SSH rule is not allowed."
  }
}

variable "trainwise_wheel_sha256" {
  description = "SHA-256 of the trainwise wheel the ingestion nodes install from wheels/ in the artifacts bucket (`sha256sum dist/trainwise-*.whl`)."
  type        = string
  default     = ""
  validation {
    condition     = var.trainwise_wheel_sha256 == "" || can(regex("^[0-9a-f]{64}$", var.trainwise_wheel_sha256))
    error_message = "trainwise_wheel_sha256 must be 64 lower-case hex digits (sha256sum's output); it is required when there are ingestion nodes."
  }
}
