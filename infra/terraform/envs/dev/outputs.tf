# What the Python side reads: `trainwise infra output --write .trainwise/aws.json` turns these
# into the Lambda backend's configuration (serverless/lambda_config.py,
# TERRAFORM_OUTPUT_KEYS).

output "aws_region" {
  description = "Region of every resource."
  value       = var.region
}

output "rollout_function_name" {
  description = "Name of the rollout function."
  value       = module.rollout_lambda.function_name
}

output "rollout_function_arn" {
  description = "ARN of the rollout function."
  value       = module.rollout_lambda.function_arn
}

output "rollout_caller_policy_arn" {
  description = "Attach to the user or role that runs rl tune or rl train off the learner nodes."
  value       = module.rollout_lambda.caller_policy_arn
}

output "rollout_role_name" {
  description = "Execution role of the rollout function."
  value       = module.rollout_lambda.role_name
}

output "lambda_memory_mb" {
  description = "Memory the function was created with."
  value       = module.rollout_lambda.memory_mb
}

output "lambda_timeout_s" {
  description = "Function timeout in seconds."
  value       = module.rollout_lambda.timeout_s
}

output "lambda_reserved_concurrency" {
  description = "Reserved concurrency of the function."
  value       = module.rollout_lambda.reserved_concurrency
}

output "lambda_architecture" {
  description = "Architecture of the function."
  value       = module.rollout_lambda.architecture
}

output "artifacts_bucket" {
  description = "Bucket for weights, large trajectories and profiles."
  value       = module.artifacts_bucket.bucket_name
}

output "s3_prefix" {
  description = "Key prefix of the rollout objects."
  value       = module.rollout_lambda.s3_prefix
}

output "learner_instance_ids" {
  description = "Learner instance ids."
  value       = module.ec2_nodes.learner_instance_ids
}

output "ingest_instance_ids" {
  description = "Ingestion node instance ids."
  value       = module.ec2_nodes.ingest_instance_ids
}

output "ingest_private_ips" {
  description = "Private addresses of the ingestion nodes (tf.data service workers)."
  value       = module.ec2_nodes.ingest_private_ips
}

output "ingest_agent_addresses" {
  description = "The ingestion nodes' node agents: `trainwise ingest cluster --workers $(trainwise infra output --raw ingest_agent_addresses)`."
  value       = module.ec2_nodes.ingest_agent_addresses
}

output "nodes_security_group_id" {
  description = "Security group of the nodes."
  value       = module.ec2_nodes.security_group_id
}

output "agent_token_parameter" {
  description = "SSM parameter of the node agents' token: export TRAINWISE_AGENT_TOKEN_PARAMETER=<this> for `ingest cluster --workers`."
  value       = module.ec2_nodes.agent_token_parameter
}
