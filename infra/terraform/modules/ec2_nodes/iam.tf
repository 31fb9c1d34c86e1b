# Instance roles: one for the learner, one for the ingestion nodes; each may do what its node
# does and nothing else.
#
# - learner: drive the rollout function (the rollout module's caller policy: its memory-size
#   aliases, the weights it writes and the trajectories it reads and deletes, all under the
#   rollout prefix), read and write the bucket's other objects (shared state, plots, runs) but
#   never wheels/ (what new nodes install), and read the node agents' token.
# - ingestion: read the wheels/ prefix and the token, nothing more.
# Both may open SSM Session Manager channels when enable_ssm is true (no SSH needed).

data "aws_iam_policy_document" "assume_ec2" {
  statement {
    effect  = "Allow"
    actions = ["sts:AssumeRole"]
    principals {
      type        = "Service"
      identifiers = ["ec2.amazonaws.com"]
    }
  }
}

resource "aws_iam_role" "learner" {
  name               = "${var.name}-learner-role"
  assume_role_policy = data.aws_iam_policy_document.assume_ec2.json
  tags               = var.tags
}

resource "aws_iam_role" "ingest" {
  name               = "${var.name}-ingest-role"
  assume_role_policy = data.aws_iam_policy_document.assume_ec2.json
  tags               = var.tags
}

# both roles read the agents' token, that one parameter
data "aws_iam_policy_document" "agent_token" {
  statement {
    sid       = "AgentToken"
    effect    = "Allow"
    actions   = ["ssm:GetParameter"]
    resources = [aws_ssm_parameter.agent_token.arn]
  }
}

data "aws_iam_policy_document" "learner" {
  source_policy_documents = [data.aws_iam_policy_document.agent_token.json]

  statement {
    sid       = "ArtifactsObjects"
    effect    = "Allow"
    actions   = ["s3:GetObject", "s3:PutObject"]
    resources = ["${var.artifacts_bucket_arn}/*"]
  }

  statement {
    sid       = "ArtifactsListing"
    effect    = "Allow"
    actions   = ["s3:ListBucket"]
    resources = [var.artifacts_bucket_arn]
  }

  statement {
    sid       = "NeverTheWheels"
    effect    = "Deny"
    actions   = ["s3:PutObject", "s3:DeleteObject"]
    resources = ["${var.artifacts_bucket_arn}/wheels/*"]
  }
}

data "aws_iam_policy_document" "ingest" {
  source_policy_documents = [data.aws_iam_policy_document.agent_token.json]

  statement {
    sid       = "Wheels"
    effect    = "Allow"
    actions   = ["s3:GetObject"]
    resources = ["${var.artifacts_bucket_arn}/wheels/*"]
  }
}

# Session Manager's channel actions (what AmazonSSMManagedInstanceCore grants for sessions,
# without its ssm:GetParameter(s) on every parameter of the account). The ssmmessages and
# ec2messages actions take no resource-level permissions, hence "*".
data "aws_iam_policy_document" "session_manager" {
  #checkov:skip=CKV_AWS_111:Session Manager's ssmmessages and ec2messages actions support no resource-level permissions or condition keys; this replaces AmazonSSMManagedInstanceCore, which grants the same plus ssm:GetParameters on every parameter.
  #checkov:skip=CKV_AWS_356:The only actions on "*" are ssmmessages and ec2messages ones that AWS cannot scope to a resource; ssm:UpdateInstanceInformation is scoped to instances.
  statement {
    sid       = "RegisterThisInstance"
    effect    = "Allow"
    actions   = ["ssm:UpdateInstanceInformation"]
    resources = ["arn:aws:ec2:*:*:instance/*"]
  }

  statement {
    sid    = "SessionManagerChannels"
    effect = "Allow"
    actions = [
      "ssmmessages:CreateControlChannel",
      "ssmmessages:CreateDataChannel",
      "ssmmessages:OpenControlChannel",
      "ssmmessages:OpenDataChannel",
      "ec2messages:AcknowledgeMessage",
      "ec2messages:DeleteMessage",
      "ec2messages:FailMessage",
      "ec2messages:GetEndpoint",
      "ec2messages:GetMessages",
      "ec2messages:SendReply",
    ]
    resources = ["*"]
  }
}

resource "aws_iam_role_policy" "learner" {
  name   = "${var.name}-learner-access"
  role   = aws_iam_role.learner.id
  policy = data.aws_iam_policy_document.learner.json
}

resource "aws_iam_role_policy" "ingest" {
  name   = "${var.name}-ingest-access"
  role   = aws_iam_role.ingest.id
  policy = data.aws_iam_policy_document.ingest.json
}

resource "aws_iam_role_policy_attachment" "rollout_caller" {
  role       = aws_iam_role.learner.name
  policy_arn = var.caller_policy_arn
}

resource "aws_iam_role_policy" "session_manager" {
  for_each = var.enable_ssm ? { learner = aws_iam_role.learner.id, ingest = aws_iam_role.ingest.id } : {}
  name     = "${var.name}-${each.key}-session-manager"
  role     = each.value
  policy   = data.aws_iam_policy_document.session_manager.json
}

resource "aws_iam_instance_profile" "learner" {
  name = "${var.name}-learner"
  role = aws_iam_role.learner.name
}

resource "aws_iam_instance_profile" "ingest" {
  name = "${var.name}-ingest"
  role = aws_iam_role.ingest.name
}
