output "function_name" {
  description = "Name of the rollout function."
  value       = aws_lambda_function.rollout.function_name
}

output "function_arn" {
  description = "ARN of the rollout function."
  value       = aws_lambda_function.rollout.arn
}

output "role_name" {
  description = "Name of the function's execution role."
  value       = aws_iam_role.rollout.name
}

output "role_arn" {
  description = "ARN of the function's execution role."
  value       = aws_iam_role.rollout.arn
}

output "log_group_name" {
  description = "The function's log group."
  value       = aws_cloudwatch_log_group.rollout.name
}

output "memory_mb" {
  description = "Memory size the function was created with."
  value       = var.memory_mb
}

output "timeout_s" {
  description = "Function timeout in seconds."
  value       = var.timeout_s
}

output "architecture" {
  description = "Instruction set architecture."
  value       = var.architecture
}

output "reserved_concurrency" {
  description = "Reserved concurrency (-1: unreserved)."
  value       = var.reserved_concurrency
}

output "s3_prefix" {
  description = "The S3 key prefix the function may use."
  value       = local.prefix
}

output "caller_policy_arn" {
  description = "Managed policy for the identity that runs the learner (rl train, rl tune): what the Lambda backend calls."
  value       = aws_iam_policy.caller.arn
}
