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

# What trainwise's Lambda backend calls (`rl train`, `rl tune`, the seraph flow), for the
# identity that runs the learner: modules/ec2_nodes attaches it to the nodes' role; attach it
# to the user or role that runs the tuner anywhere else. Each memory size runs as a published
# version behind an alias named trainwise-<MB>mb: the backend reads $LATEST and the versions,
# sets $LATEST's memory, publishes it, creates or moves the alias, and invokes only those
# aliases. It deletes no alias or version (docs/aws.md), so it may not. S3: it puts policy
# weights under the prefix's weights/ and reads and deletes offloaded trajectories under its
# trajectories/.
data "aws_iam_policy_document" "caller" {
  statement {
    sid       = "InvokeMemorySizeAliases"
    effect    = "Allow"
    actions   = ["lambda:InvokeFunction"]
    resources = ["${aws_lambda_function.rollout.arn}:trainwise-*"]
  }

  statement {
    sid       = "ReadFunctionAndItsVersions"
    effect    = "Allow"
    actions   = ["lambda:GetFunctionConfiguration"]
    resources = [aws_lambda_function.rollout.arn, "${aws_lambda_function.rollout.arn}:*"]
  }

  statement {
    sid    = "PublishMemorySizes"
    effect = "Allow"
    actions = [
      "lambda:UpdateFunctionConfiguration",
      "lambda:PublishVersion",
      "lambda:GetAlias",
      "lambda:CreateAlias",
      "lambda:UpdateAlias",
    ]
    resources = [aws_lambda_function.rollout.arn]
  }

  statement {
    sid       = "PutWeightsUnderOwnPrefix"
    effect    = "Allow"
    actions   = ["s3:PutObject"]
    resources = ["${var.artifacts_bucket_arn}/${local.prefix}/weights/*"]
  }

  statement {
    sid       = "FetchTrajectoriesUnderOwnPrefix"
    effect    = "Allow"
    actions   = ["s3:GetObject", "s3:DeleteObject"]
    resources = ["${var.artifacts_bucket_arn}/${local.prefix}/trajectories/*"]
  }
}

resource "aws_iam_policy" "caller" {
  name        = "${var.name}-caller"
  description = "Drive the trainwise rollout function: invoke its memory-size aliases, publish them, move rollout payloads"
  policy      = data.aws_iam_policy_document.caller.json
  tags        = var.tags
}
