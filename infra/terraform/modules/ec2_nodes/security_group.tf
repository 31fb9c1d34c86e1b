# The nodes' security group. No open ingress: by default the only inbound traffic allowed is
# from the group itself (the tf.data service between learner and ingestion nodes, and the node
# agents, which start workers for whoever reaches them: the group is their boundary). Operators
# use SSM Session Manager; SSH is opened only to the narrow CIDRs in var.admin_cidrs.
# Outbound rules live in outbound.tf.

resource "aws_security_group" "nodes" {
  name        = "${var.name}-nodes"
  description = "trainwise learner and ingestion nodes"
  vpc_id      = var.vpc_id
  tags        = var.tags
}

resource "aws_vpc_security_group_ingress_rule" "data_service_from_group" {
  security_group_id            = aws_security_group.nodes.id
  description                  = "tf.data service between the nodes"
  ip_protocol                  = "tcp"
  from_port                    = var.data_service_ports.from
  to_port                      = var.data_service_ports.to
  referenced_security_group_id = aws_security_group.nodes.id
}

resource "aws_vpc_security_group_ingress_rule" "agent_from_group" {
  security_group_id            = aws_security_group.nodes.id
  description                  = "trainwise node agent, from the dispatcher's nodes"
  ip_protocol                  = "tcp"
  from_port                    = var.agent_port
  to_port                      = var.agent_port
  referenced_security_group_id = aws_security_group.nodes.id
}

resource "aws_vpc_security_group_ingress_rule" "ssh_from_admins" {
  for_each          = toset(var.admin_cidrs)
  security_group_id = aws_security_group.nodes.id
  description       = "SSH from an operator network"
  ip_protocol       = "tcp"
  from_port         = 22
  to_port           = 22
  cidr_ipv4         = each.value
}
