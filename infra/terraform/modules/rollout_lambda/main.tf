locals {
  prefix = trim(var.s3_prefix, "/")
}

resource "aws_cloudwatch_log_group" "rollout" {
  #checkov:skip=CKV_AWS_158:The handler logs only step counts and timings, no data or secrets; CloudWatch encrypts log groups at rest with its own keys, and a customer key would add a key policy and a monthly charge for nothing to protect.
  #checkov:skip=CKV_AWS_338:Rollout logs serve debugging a training run, not audit; retention is var.log_retention_days (14 by default) so they do not pile up, and an operator who needs a year sets it.
  name              = "/aws/lambda/${var.name}"
  retention_in_days = var.log_retention_days
  tags              = var.tags
}

resource "aws_lambda_layer_version" "deps" {
  count                    = var.layer_zip_path == "" ? 0 : 1
  layer_name               = "${var.name}-deps"
  description              = "numpy and gymnasium for the rollout handler (serverless/lambda_package.py --layer)"
  filename                 = var.layer_zip_path
  source_code_hash         = filebase64sha256(var.layer_zip_path)
  compatible_runtimes      = [var.runtime]
  compatible_architectures = [var.architecture]
}

resource "aws_lambda_function" "rollout" {
  #checkov:skip=CKV_AWS_116:The trainer invokes the function synchronously (RequestResponse) and retries failures itself; a dead-letter queue only receives failed asynchronous invocations.
  #checkov:skip=CKV_AWS_117:The function reaches only S3 and reads nothing private in a VPC; running it in a VPC would need a NAT gateway or endpoints and lengthen cold starts, which the tuner measures.
  #checkov:skip=CKV_AWS_272:The package is built from this repository by serverless/lambda_package.py and deployed by the same operator; there is no signing profile in the deploy path.
  #checkov:skip=CKV_AWS_173:The environment holds only the artifacts bucket name and S3 prefix, no secrets; Lambda encrypts environment variables at rest with an AWS key already.
  #checkov:skip=CKV_AWS_50:Every invocation's duration and billed time already land on trainwise's ledger; X-Ray on thousands of short rollouts would add cost and broaden the role (xray:PutTraceSegments on *).
  function_name    = var.name
  description      = "trainwise rollout actor: runs N environment steps with the given policy weights"
  role             = aws_iam_role.rollout.arn
  handler          = var.handler
  runtime          = var.runtime
  architectures    = [var.architecture]
  filename         = var.package_zip_path
  source_code_hash = filebase64sha256(var.package_zip_path)
  memory_size      = var.memory_mb
  timeout          = var.timeout_s
  layers           = concat(aws_lambda_layer_version.deps[*].arn, var.extra_layer_arns)

  reserved_concurrent_executions = var.reserved_concurrency

  environment {
    variables = {
      TRAINWISE_ARTIFACTS_BUCKET = var.artifacts_bucket_name
      TRAINWISE_S3_PREFIX        = local.prefix
    }
  }

  logging_config {
    log_format = "Text"
    log_group  = aws_cloudwatch_log_group.rollout.name
  }

  tags = var.tags

  lifecycle {
    # trainwise's Lambda backend sets $LATEST's memory before it publishes a version for
    # each memory size it uses (docs/aws.md); a later apply must not fight it.
    ignore_changes = [memory_size]
  }

  depends_on = [aws_iam_role_policy.rollout, aws_cloudwatch_log_group.rollout]
}
