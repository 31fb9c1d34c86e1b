variable "bucket_name" {
  description = "Globally unique bucket name."
  type        = string
}

variable "s3_prefix" {
  description = "Prefix of the rollout function's objects (weights/ and trajectories/ live under it)."
  type        = string
  default     = "rollouts"
}

variable "trajectories_expire_days" {
  description = "Offloaded trajectories are read and deleted by the learner at once; this rule removes any left behind."
  type        = number
  default     = 3
}

variable "weights_expire_days" {
  description = "Policy weights are content-addressed per training iteration; old ones expire."
  type        = number
  default     = 14
}

variable "plots_expire_days" {
  description = "Days before a run's plots under plots/ expire (their presigned links last at most 7 days)."
  type        = number
  default     = 14
  validation {
    condition     = var.plots_expire_days >= 1 && floor(var.plots_expire_days) == var.plots_expire_days
    error_message = "plots_expire_days must be a whole number of days, at least 1."
  }
}

variable "noncurrent_expire_days" {
  description = "Days before a noncurrent (overwritten or deleted) object version is removed."
  type        = number
  default     = 7
}

variable "force_destroy" {
  description = "Let `terraform destroy` delete a non-empty bucket (dev: true; keep false where profiles matter)."
  type        = bool
  default     = false
}

variable "tags" {
  description = "Tags for every resource of this module."
  type        = map(string)
  default     = {}
}
