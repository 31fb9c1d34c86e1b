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

output "instance_role_name" {
  description = "Instance role of the nodes."
  value       = aws_iam_role.nodes.name
}

output "launch_template_ids" {
  description = "Launch template id per role."
  value       = { for role, lt in aws_launch_template.node : role => lt.id }
}
