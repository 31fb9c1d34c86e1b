# The function's role, least privilege: write to its own log group, read weights and write
# trajectories under its own S3 prefix. No other action, no other resource.

data "aws_iam_policy_document" "assume_lambda" {
  statement {
    sid     = "LambdaAssumesRole"
    effect  = "Allow"
    actions = ["sts:AssumeRole"]
    principals {
      type        = "Service"
      identifiers = ["lambda.amazonaws.com"]
    }
  }
}

resource "aws_iam_role" "rollout" {
  name               = "${var.name}-role"
  assume_role_policy = data.aws_iam_policy_document.assume_lambda.json
  tags               = var.tags
}

data "aws_iam_policy_document" "rollout" {
  statement {
    sid       = "OwnLogGroupOnly"
    effect    = "Allow"
    actions   = ["logs:CreateLogStream", "logs:PutLogEvents"]
    resources = ["${aws_cloudwatch_log_group.rollout.arn}:log-stream:*"]
  }

  statement {
    sid       = "ReadWeightsUnderOwnPrefix"
    effect    = "Allow"
    actions   = ["s3:GetObject"]
    resources = ["${var.artifacts_bucket_arn}/${local.prefix}/weights/*"]
  }

  statement {
    sid       = "WriteTrajectoriesUnderOwnPrefix"
    effect    = "Allow"
    actions   = ["s3:PutObject"]
    resources = ["${var.artifacts_bucket_arn}/${local.prefix}/trajectories/*"]
  }
}

resource "aws_iam_role_policy" "rollout" {
  name   = "${var.name}-least-privilege"
  role   = aws_iam_role.rollout.id
  policy = data.aws_iam_policy_document.rollout.json
}
