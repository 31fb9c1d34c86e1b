# Outbound rules of the nodes' security group: HTTPS only (AWS APIs: Lambda, S3, SSM; package
# installs), plus the tf.data service and node agent ports inside the group. Narrow egress_https_cidrs to
# your VPC endpoints' ranges or a proxy where the account allows it.

variable "egress_https_cidrs" {
  description = "Destinations the nodes may reach on TCP 443."
  type        = list(string)
  default     = ["0.0.0.0/0"]
}

resource "aws_vpc_security_group_egress_rule" "https" {
  for_each          = toset(var.egress_https_cidrs)
  security_group_id = aws_security_group.nodes.id
  description       = "HTTPS to AWS APIs and package mirrors"
  ip_protocol       = "tcp"
  from_port         = 443
  to_port           = 443
  cidr_ipv4         = each.value
}

resource "aws_vpc_security_group_egress_rule" "data_service_to_group" {
  security_group_id            = aws_security_group.nodes.id
  description                  = "tf.data service between the nodes"
  ip_protocol                  = "tcp"
  from_port                    = var.data_service_ports.from
  to_port                      = var.data_service_ports.to
  referenced_security_group_id = aws_security_group.nodes.id
}

resource "aws_vpc_security_group_egress_rule" "agent_to_group" {
  security_group_id            = aws_security_group.nodes.id
  description                  = "trainwise node agents in the group"
  ip_protocol                  = "tcp"
  from_port                    = var.agent_port
  to_port                      = var.agent_port
  referenced_security_group_id = aws_security_group.nodes.id
}
