output "bucket_name" {
  description = "Name of the artifacts bucket."
  value       = aws_s3_bucket.artifacts.id
}

output "bucket_arn" {
  description = "ARN of the artifacts bucket."
  value       = aws_s3_bucket.artifacts.arn
}

output "s3_prefix" {
  description = "Prefix of the rollout function's objects."
  value       = local.prefix
}
