# Learner and ingestion nodes: one launch template per role (IMDSv2 required, encrypted
# root volume), and plain instances launched from them.

locals {
  # one ingestion role per instance type of the plan ("ingest-c7g-2xlarge"), or the single "ingest" role
  ingest_pools = length(var.ingest_pools) > 0 ? var.ingest_pools : [{ instance_type = var.ingest_instance_type, count = var.ingest_count }]
  ingest_roles = {
    for pool in local.ingest_pools :
    (length(var.ingest_pools) > 0 ? "ingest-${replace(pool.instance_type, ".", "-")}" : "ingest") => pool
  }
  roles = merge({ learner = { instance_type = var.learner_instance_type, count = var.learner_count } }, local.ingest_roles)
  # "learner-0" => "learner", "ingest-0" => "ingest", ...
  instances = merge([for role, spec in local.roles : { for i in range(spec.count) : "${role}-${i}" => role }]...)
  ami_id    = var.ami_id != "" ? var.ami_id : data.aws_ssm_parameter.al2023[0].value
  # the ingestion nodes run the node agent; the first ten data-service ports are the dispatchers'
  ingest_user_data = templatefile("${path.module}/node_agent.sh.tftpl", {
    bucket         = element(split(":::", var.artifacts_bucket_arn), 1)
    wheel_key      = var.trainwise_wheel_key
    wheel_file     = basename(var.trainwise_wheel_key)
    trainwise_home = "/var/lib/trainwise"
    data_rows      = 40000
    data_shards    = 8
    agent_port     = var.agent_port
    worker_ports   = "${var.data_service_ports.from + 10}-${var.data_service_ports.to}"
  })
}

data "aws_ssm_parameter" "al2023" {
  count = var.ami_id == "" ? 1 : 0
  name  = "/aws/service/ami-amazon-linux-latest/al2023-ami-kernel-default-${var.architecture}"
}

resource "aws_launch_template" "node" {
  for_each      = local.roles
  name_prefix   = "${var.name}-${each.key}-"
  image_id      = local.ami_id
  instance_type = each.value.instance_type
  user_data     = startswith(each.key, "ingest") ? base64encode(local.ingest_user_data) : (var.user_data == "" ? null : base64encode(var.user_data))

  vpc_security_group_ids = [aws_security_group.nodes.id]

  iam_instance_profile {
    arn = aws_iam_instance_profile.nodes.arn
  }

  ebs_optimized = true

  monitoring {
    enabled = var.detailed_monitoring
  }

  metadata_options {
    http_endpoint               = "enabled"
    http_tokens                 = "required"
    http_put_response_hop_limit = 1
  }

  block_device_mappings {
    device_name = "/dev/xvda"
    ebs {
      volume_size           = var.root_volume_gb
      volume_type           = "gp3"
      encrypted             = true
      delete_on_termination = true
    }
  }

  tag_specifications {
    resource_type = "instance"
    tags          = merge(var.tags, { Name = "${var.name}-${each.key}", "trainwise:role" = each.key })
  }

  tags = var.tags
}

# The instance repeats the launch template's hardening (IMDSv2, encrypted root volume, the
# instance profile) so that it holds even if the template is edited, and so scanners that do
# not follow launch templates see it.
resource "aws_instance" "node" {
  for_each             = local.instances
  subnet_id            = var.subnet_id
  iam_instance_profile = aws_iam_instance_profile.nodes.name
  ebs_optimized        = true
  monitoring           = var.detailed_monitoring

  launch_template {
    id      = aws_launch_template.node[each.value].id
    version = aws_launch_template.node[each.value].latest_version
  }

  metadata_options {
    http_endpoint               = "enabled"
    http_tokens                 = "required"
    http_put_response_hop_limit = 1
  }

  root_block_device {
    volume_size           = var.root_volume_gb
    volume_type           = "gp3"
    encrypted             = true
    delete_on_termination = true
  }

  tags = merge(var.tags, { Name = "${var.name}-${each.key}", "trainwise:role" = each.value })
}
