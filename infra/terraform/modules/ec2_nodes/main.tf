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

  # Each role's AMI matches its instance type's architecture: Graviton families (a1, and a
  # generation digit followed by "g": c7g, c7gn, m6gd, t4g, x2gd, im4gn, hpc7g) are arm64, the
  # rest x86_64, unless var.architectures names the type.
  arm64_family      = "^(a1|[a-z]+[0-9]+g[a-z]*)$"
  role_architecture = { for role, spec in local.roles : role => lookup(var.architectures, spec.instance_type, can(regex(local.arm64_family, split(".", spec.instance_type)[0])) ? "arm64" : "x86_64") }
  looked_up_amis    = { for arch in distinct(values(local.role_architecture)) : arch => arch if lookup(var.ami_ids, arch, "") == "" }
  role_ami          = { for role, arch in local.role_architecture : role => lookup(var.ami_ids, arch, "") != "" ? var.ami_ids[arch] : data.aws_ssm_parameter.al2023[arch].value }

  # the ingestion nodes run the node agent; the first ten data-service ports are the dispatchers'
  ingest_user_data = templatefile("${path.module}/node_agent.sh.tftpl", {
    bucket          = element(split(":::", var.artifacts_bucket_arn), 1)
    wheel_key       = var.trainwise_wheel_key
    wheel_file      = basename(var.trainwise_wheel_key)
    wheel_sha256    = var.trainwise_wheel_sha256
    trainwise_home  = "/var/lib/trainwise"
    data_rows       = 40000
    data_shards     = 8
    agent_port      = var.agent_port
    worker_ports    = "${var.data_service_ports.from + 10}-${var.data_service_ports.to}"
    dispatchers     = var.dispatcher_cidr
    token_parameter = aws_ssm_parameter.agent_token.name
  })
}

data "aws_ssm_parameter" "al2023" {
  for_each = local.looked_up_amis
  name     = "/aws/service/ami-amazon-linux-latest/al2023-ami-kernel-default-${each.key}"
}

resource "aws_launch_template" "node" {
  for_each      = local.roles
  name_prefix   = "${var.name}-${each.key}-"
  image_id      = local.role_ami[each.key]
  instance_type = each.value.instance_type
  user_data     = startswith(each.key, "ingest") ? base64encode(local.ingest_user_data) : (var.user_data == "" ? null : base64encode(var.user_data))

  vpc_security_group_ids = [aws_security_group.nodes.id]

  iam_instance_profile {
    arn = startswith(each.key, "ingest") ? aws_iam_instance_profile.ingest.arn : aws_iam_instance_profile.learner.arn
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

  lifecycle {
    precondition {
      condition     = !startswith(each.key, "ingest") || can(regex("^[0-9a-f]{64}$", var.trainwise_wheel_sha256))
      error_message = "ingestion nodes install the trainwise wheel only if its SHA-256 matches: set trainwise_wheel_sha256 (sha256sum dist/trainwise-*.whl)."
    }
  }
}

# The instance repeats the launch template's hardening (IMDSv2, encrypted root volume, the
# instance profile) so that it holds even if the template is edited, and so scanners that do
# not follow launch templates see it.
resource "aws_instance" "node" {
  for_each             = local.instances
  subnet_id            = var.subnet_id
  iam_instance_profile = startswith(each.value, "ingest") ? aws_iam_instance_profile.ingest.name : aws_iam_instance_profile.learner.name
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
