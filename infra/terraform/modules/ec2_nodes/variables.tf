variable "name" {
  description = "Name prefix for the nodes, their security group, role and launch templates."
  type        = string
}

variable "vpc_id" {
  description = "VPC of the nodes."
  type        = string
}

variable "subnet_id" {
  description = "Subnet of the nodes."
  type        = string
}

variable "ami_ids" {
  description = "AMI per architecture (keys x86_64, arm64); an architecture not named gets the latest Amazon Linux 2023 for it."
  type        = map(string)
  default     = {}
  validation {
    condition     = alltrue([for arch in keys(var.ami_ids) : contains(["x86_64", "arm64"], arch)])
    error_message = "ami_ids keys must be x86_64 or arm64."
  }
}

variable "architectures" {
  description = "Architecture of an instance type the family rule (Graviton families are arm64) gets wrong, e.g. { \"a1.large\" = \"arm64\" }."
  type        = map(string)
  default     = {}
  validation {
    condition     = alltrue([for arch in values(var.architectures) : contains(["x86_64", "arm64"], arch)])
    error_message = "architectures values must be x86_64 or arm64."
  }
}

variable "dispatcher_cidr" {
  description = "The only network whose tf.data dispatchers the node agents start workers for (`node-agent --dispatchers`): the VPC's CIDR."
  type        = string
  validation {
    condition     = can(cidrhost(var.dispatcher_cidr, 0)) && tonumber(split("/", var.dispatcher_cidr)[1]) >= 8
    error_message = "dispatcher_cidr must be a CIDR of /8 or narrower (the VPC's), such as 10.0.0.0/16."
  }
}

variable "learner_instance_type" {
  description = "Instance type of the PPO learner."
  type        = string
  default     = "c7i.large"
}

variable "learner_count" {
  description = "Number of learner instances (0 or 1 in practice)."
  type        = number
  default     = 1
}

variable "ingest_instance_type" {
  description = "Instance type of the tf.data ingestion nodes."
  type        = string
  default     = "c7i.large"
}

variable "ingest_count" {
  description = "Number of ingestion nodes."
  type        = number
  default     = 1
}

variable "ingest_pools" {
  description = "Ingestion nodes per instance type (an InTuneX plan: `trainwise ingest cluster --write-tfvars`); when non-empty it replaces ingest_instance_type and ingest_count."
  type        = list(object({ instance_type = string, count = number }))
  default     = []
}

variable "root_volume_gb" {
  description = "Size of each node's encrypted gp3 root volume."
  type        = number
  default     = 30
}

variable "detailed_monitoring" {
  description = "One-minute CloudWatch metrics for every node (billed per metric); tuning trials last minutes, which five-minute metrics blur."
  type        = bool
  default     = true
}

variable "admin_cidrs" {
  description = "CIDRs allowed to reach SSH. Empty (the default) opens no port to anyone: use SSM Session Manager."
  type        = list(string)
  default     = []
  validation {
    condition     = alltrue([for c in var.admin_cidrs : can(cidrhost(c, 0)) && tonumber(split("/", c)[1]) >= 16])
    error_message = "admin_cidrs must be valid CIDRs of /16 or narrower; a world-open SSH rule is not allowed."
  }
}

variable "data_service_ports" {
  description = "TCP port range the tf.data service uses between the nodes: the first ten for the jobs' dispatchers (`ingest cluster --dispatcher-ports`), the rest for the node agents' workers."
  type        = object({ from = number, to = number })
  default     = { from = 5050, to = 5099 }
  validation {
    condition     = var.data_service_ports.from >= 1024 && var.data_service_ports.to <= 65535 && var.data_service_ports.to >= var.data_service_ports.from + 10
    error_message = "data_service_ports must lie in 1024-65535 and hold more than ten ports (ten for dispatchers, the rest for workers)."
  }
}

variable "agent_port" {
  description = "TCP port of the node agent on each ingestion node (`trainwise ingest node-agent`), reachable from the nodes' security group only."
  type        = number
  default     = 5040
  validation {
    condition     = var.agent_port >= 1024 && var.agent_port <= 65535
    error_message = "agent_port must be in 1024-65535."
  }
}

variable "trainwise_wheel_key" {
  description = "Object key of the trainwise wheel in the artifacts bucket, which the ingestion nodes install (`pip wheel . --no-deps -w dist`, then copy it there)."
  type        = string
  default     = "wheels/trainwise-0.1.0-py3-none-any.whl"
  validation {
    condition     = startswith(var.trainwise_wheel_key, "wheels/") && endswith(var.trainwise_wheel_key, ".whl")
    error_message = "trainwise_wheel_key must be a .whl under wheels/ (the only prefix the ingestion nodes may read)."
  }
}

variable "trainwise_wheel_sha256" {
  description = "SHA-256 of that wheel (`sha256sum dist/trainwise-*.whl`); the ingestion nodes refuse to install a wheel with another hash."
  type        = string
  default     = ""
  validation {
    condition     = var.trainwise_wheel_sha256 == "" || can(regex("^[0-9a-f]{64}$", var.trainwise_wheel_sha256))
    error_message = "trainwise_wheel_sha256 must be 64 lower-case hex digits (sha256sum's output); it is required when there are ingestion nodes."
  }
}

variable "enable_ssm" {
  description = "Let operators reach nodes with SSM Session Manager (its channel actions only), not SSH."
  type        = bool
  default     = true
}

variable "caller_policy_arn" {
  description = "The rollout module's caller policy: what the learner calls on the rollout function."
  type        = string
}

variable "artifacts_bucket_arn" {
  description = "Artifacts bucket the nodes read and write."
  type        = string
}

variable "user_data" {
  description = "Optional cloud-init script for the learner nodes (the ingestion nodes run the node agent's)."
  type        = string
  default     = ""
}

variable "tags" {
  description = "Tags for every resource of this module."
  type        = map(string)
  default     = {}
}
