variable "name" {
  description = "Function name; also names its role and its log group (/aws/lambda/<name>)."
  type        = string
}

variable "package_zip_path" {
  description = "Path of the function zip built by `python -m serverless.lambda_package --out build/rollout.zip`."
  type        = string
}

variable "layer_zip_path" {
  description = "Path of the numpy+gymnasium layer zip (`python -m serverless.lambda_package --layer`); empty for none."
  type        = string
  default     = ""
}

variable "extra_layer_arns" {
  description = "Further layer ARNs to attach (for example a shared, already published dependency layer)."
  type        = list(string)
  default     = []
}

variable "handler" {
  description = "Module path of the rollout handler inside the zip."
  type        = string
  default     = "serverless.handler.handler"
}

variable "runtime" {
  description = "Lambda managed runtime (Amazon Linux 2023); matches serverless/lambda_package.py LAMBDA_PYTHON_VERSION, the Python the layer's wheels are built for."
  type        = string
  default     = "python3.12"
  validation {
    condition     = can(regex("^python3\\.(1[2-9]|[2-9][0-9])$", var.runtime))
    error_message = "runtime must be a Python runtime on Amazon Linux 2023: python3.12 or later."
  }
}

variable "architecture" {
  description = "x86_64 or arm64 (arm64 is about 20% cheaper per GB-second)."
  type        = string
  default     = "x86_64"
  validation {
    condition     = contains(["x86_64", "arm64"], var.architecture)
    error_message = "architecture must be x86_64 or arm64."
  }
}

variable "memory_mb" {
  description = "Initial memory size. The tuner changes it between training phases; Terraform ignores that drift."
  type        = number
  default     = 1769
  validation {
    condition     = var.memory_mb >= 128 && var.memory_mb <= 10240 && floor(var.memory_mb) == var.memory_mb
    error_message = "memory_mb must be a whole number of MB from 128 to 10240."
  }
}

variable "timeout_s" {
  description = "Function timeout in seconds (Lambda allows at most 900)."
  type        = number
  default     = 300
  validation {
    condition     = var.timeout_s >= 1 && var.timeout_s <= 900
    error_message = "timeout_s must be from 1 to 900 seconds."
  }
}

variable "reserved_concurrency" {
  description = "Reserved concurrent executions: caps the actors (and the spend) of a run; -1 leaves it unreserved."
  type        = number
  default     = 20
  validation {
    condition     = var.reserved_concurrency == -1 || var.reserved_concurrency >= 0
    error_message = "reserved_concurrency must be -1 (unreserved) or a non-negative number."
  }
}

variable "log_retention_days" {
  description = "Retention of the function's log group, in days."
  type        = number
  default     = 14
}

variable "artifacts_bucket_name" {
  description = "Bucket for weights and offloaded trajectories (modules/artifacts_bucket)."
  type        = string
}

variable "artifacts_bucket_arn" {
  description = "ARN of that bucket."
  type        = string
}

variable "s3_prefix" {
  description = "The only key prefix the function may touch: it reads <prefix>/weights/ and writes <prefix>/trajectories/."
  type        = string
  default     = "rollouts"
}

variable "tags" {
  description = "Tags for every resource of this module."
  type        = map(string)
  default     = {}
}
