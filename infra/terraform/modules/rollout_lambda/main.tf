locals {
  prefix = trim(var.s3_prefix, "/")
}

resource "aws_cloudwatch_log_group" "rollout" {
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
    # The tuner sets the memory size between training phases (trainwise's Lambda backend);
    # a later apply must not undo it.
    ignore_changes = [memory_size]
  }

  depends_on = [aws_iam_role_policy.rollout, aws_cloudwatch_log_group.rollout]
}
