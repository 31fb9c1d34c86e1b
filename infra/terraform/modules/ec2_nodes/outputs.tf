output "learner_instance_ids" {
  description = "Instance ids of the learner nodes."
  value       = [for key, instance in aws_instance.node : instance.id if startswith(key, "learner-")]
}

output "ingest_instance_ids" {
  description = "Instance ids of the ingestion nodes."
  value       = [for key, instance in aws_instance.node : instance.id if startswith(key, "ingest-")]
}

output "ingest_private_ips" {
  description = "Private addresses of the ingestion nodes."
  value       = [for key, instance in aws_instance.node : instance.private_ip if startswith(key, "ingest-")]
}

output "ingest_agent_addresses" {
  description = "The ingestion nodes' node agents (IP:PORT), for `trainwise ingest cluster --workers`."
  value       = [for key, instance in aws_instance.node : "${instance.private_ip}:${var.agent_port}" if startswith(key, "ingest-")]
}

output "security_group_id" {
  description = "Security group of the nodes."
  value       = aws_security_group.nodes.id
}

output "learner_role_name" {
  description = "Instance role of the learner nodes."
  value       = aws_iam_role.learner.name
}

output "ingest_role_name" {
  description = "Instance role of the ingestion nodes."
  value       = aws_iam_role.ingest.name
}

output "agent_token_parameter" {
  description = "SSM SecureString holding the node agents' token: export TRAINWISE_AGENT_TOKEN_PARAMETER=<this> where `ingest cluster --workers` runs."
  value       = aws_ssm_parameter.agent_token.name
}

output "role_architectures" {
  description = "Architecture of each node role's AMI (from its instance type)."
  value       = local.role_architecture
}

output "launch_template_ids" {
  description = "Launch template id per role."
  value       = { for role, lt in aws_launch_template.node : role => lt.id }
}
