# The node agents' shared token: generated here, kept in an SSM SecureString, read by the
# agents at start (`TRAINWISE_AGENT_TOKEN_PARAMETER`) and by `ingest cluster --workers`. It is in
# the Terraform state too: keep the state private (docs/aws.md, "Sharing state in a team").

resource "random_password" "agent_token" {
  length  = 48
  special = false
}

resource "aws_ssm_parameter" "agent_token" {
  #checkov:skip=CKV_AWS_337:The AWS managed key alias/aws/ssm encrypts the SecureString; a customer managed key would add a key and its policy for one parameter that only these two roles may read.
  name        = "/${var.name}/node-agent-token"
  description = "Bearer token of the trainwise node agents (trainwise ingest node-agent)."
  type        = "SecureString"
  value       = random_password.agent_token.result
  tags        = var.tags
}
