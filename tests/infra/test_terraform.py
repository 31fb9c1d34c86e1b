"""Static checks of infra/terraform, parsed with python-hcl2 (no terraform binary or provider needed).

The helpers at the top (load a module, resolve a simple name template) are also used by
tests/serverless/backends/test_lambda_backend.py to create the moto resources under the names Terraform would give.
"""

from __future__ import annotations

import ipaddress
import json
import math
import re
import shutil
import subprocess
import types
from functools import lru_cache
from pathlib import Path
from typing import Any

import hcl2
import pytest

from serverless.lambda_config import TERRAFORM_OUTPUT_KEYS
from serverless.lambda_package import LAMBDA_RUNTIME

ROOT = Path(__file__).resolve().parents[2]
TF = ROOT / "infra" / "terraform"
MODULES = {name: TF / "modules" / name for name in ("rollout_lambda", "artifacts_bucket", "ec2_nodes")}
DEV = TF / "envs" / "dev"
META_ARGS = {"source", "version", "count", "for_each", "depends_on", "providers", "__is_block__", "__comments__"}
MOTO_ACCOUNT_ID = "123456789012"  # moto's default account


# ---------------------------------------------------------------------------------------------
# helpers


def unquote(value: Any) -> Any:
    """python-hcl2 v8 keeps string quotes: '"x"' -> 'x'."""
    if isinstance(value, str) and len(value) >= 2 and value[0] == value[-1] == '"':
        return value[1:-1]
    return value


def _strip_comments(obj: Any) -> Any:
    if isinstance(obj, dict):
        return {k: _strip_comments(v) for k, v in obj.items() if k != "__comments__"}
    if isinstance(obj, list):
        return [_strip_comments(v) for v in obj]
    return obj


@lru_cache(maxsize=None)
def _parse(path: Path) -> dict[str, Any]:
    with open(path) as handle:
        return _strip_comments(hcl2.load(handle))


def module_files(directory: Path) -> list[Path]:
    return sorted(directory.glob("*.tf"))


def blocks(directory: Path, kind: str) -> list[dict[str, Any]]:
    """All blocks of ``kind`` (variable, output, resource, data, module, locals) in a directory."""
    found: list[dict[str, Any]] = []
    for path in module_files(directory):
        found.extend(_parse(path).get(kind, []))
    return found


def named(directory: Path, kind: str) -> dict[str, dict[str, Any]]:
    """{name: body} for single-label blocks (variable, output, module)."""
    out: dict[str, dict[str, Any]] = {}
    for block in blocks(directory, kind):
        for name, body in block.items():
            out[unquote(name)] = body
    return out


def resources(directory: Path, kind: str = "resource") -> dict[tuple[str, str], dict[str, Any]]:
    """{(type, name): body} for resource or data blocks."""
    out: dict[tuple[str, str], dict[str, Any]] = {}
    for block in blocks(directory, kind):
        for rtype, by_name in block.items():
            for rname, body in by_name.items():
                out[(unquote(rtype), unquote(rname))] = body
    return out


def local_values(directory: Path) -> dict[str, Any]:
    merged: dict[str, Any] = {}
    for block in blocks(directory, "locals"):
        merged.update({k: v for k, v in block.items() if k != "__is_block__"})
    return merged


def variable_defaults(directory: Path) -> dict[str, Any]:
    return {name: unquote(body.get("default")) for name, body in named(directory, "variable").items()}


def resolve(template: str, directory: Path, variables: dict[str, Any] | None = None,
            account_id: str = MOTO_ACCOUNT_ID) -> str:
    """Evaluate a name template made only of var./local. references and the caller's account id.

    Enough for the names the outputs give (``"${local.name}-rollout"``); raises on anything else,
    so a name Terraform computes in a way this cannot follow fails the test instead of guessing.
    """
    variables = {**variable_defaults(directory), **(variables or {})}
    locals_ = local_values(directory)
    text = unquote(template)
    if text.startswith("${") and text.endswith("}") and text.count("${") == 1:
        text = "${" + text[2:-1] + "}"

    def one(match: re.Match[str]) -> str:
        ref = match.group(1).strip()
        if ref.startswith("var."):
            return str(variables[ref[4:]])
        if ref.startswith("local."):
            return resolve(locals_[ref[6:]], directory, variables, account_id)
        if ref == "data.aws_caller_identity.current.account_id":
            return account_id
        raise ValueError(f"cannot resolve {ref!r} statically")

    return re.sub(r"\$\{([^}]*)\}", one, text)


def dev_names(region: str = "us-east-1") -> dict[str, str]:
    """The function, role and bucket names envs/dev gives, computed from the Terraform source."""
    modules = named(DEV, "module")
    dev_vars = {"region": region}
    function_name = resolve(modules["rollout_lambda"]["name"], DEV, dev_vars)
    bucket = resolve(modules["artifacts_bucket"]["bucket_name"], DEV, dev_vars)
    role_template = resources(MODULES["rollout_lambda"])[("aws_iam_role", "rollout")]["name"]
    role = resolve(role_template, MODULES["rollout_lambda"], {"name": function_name})
    prefix = variable_defaults(DEV)["s3_prefix"]
    return {"function_name": function_name, "role_name": role, "bucket": bucket, "s3_prefix": prefix,
            "memory_mb": variable_defaults(DEV)["lambda_memory_mb"],
            "timeout_s": variable_defaults(DEV)["lambda_timeout_s"],
            "reserved_concurrency": variable_defaults(DEV)["lambda_reserved_concurrency"],
            "architecture": variable_defaults(DEV)["lambda_architecture"]}


def _refs(obj: Any, pattern: str) -> set[str]:
    return set(re.findall(pattern, json.dumps(obj)))


# ---------------------------------------------------------------------------------------------
# structure


def test_every_tf_file_parses_and_layout_exists() -> None:
    files = sorted(TF.rglob("*.tf"))
    assert files, "no .tf files"
    for directory in [*MODULES.values(), DEV]:
        assert module_files(directory), f"{directory} has no .tf files"
        assert (directory / "variables.tf").is_file() and (directory / "outputs.tf").is_file()
    for path in files:
        assert isinstance(_parse(path), dict), path
    assert (DEV / "versions.tf").is_file()


def test_dev_pins_the_aws_provider() -> None:
    terraform = _parse(DEV / "versions.tf")["terraform"][0]
    aws = terraform["required_providers"][0]["aws"]
    assert unquote(aws["source"]) == "hashicorp/aws"
    version = unquote(aws["version"])
    assert version.startswith("~>"), f"pin the AWS provider to a major version with ~>, got {version}"
    assert unquote(terraform["required_version"]).startswith(">=")


@pytest.mark.parametrize("directory", [*MODULES.values(), DEV], ids=lambda d: d.name)
def test_every_variable_used_is_declared(directory: Path) -> None:
    declared = set(named(directory, "variable"))
    used: set[str] = set()
    for path in module_files(directory):
        used |= _refs(_parse(path), r"\bvar\.([A-Za-z_][A-Za-z0-9_-]*)")
    assert used, f"{directory.name} uses no variables at all?"
    assert used <= declared, f"{directory.name}: used but not declared: {sorted(used - declared)}"
    unused = declared - used
    assert not unused, f"{directory.name}: declared but never used: {sorted(unused)}"


@pytest.mark.parametrize("directory", [*MODULES.values(), DEV], ids=lambda d: d.name)
def test_every_local_and_resource_reference_exists(directory: Path) -> None:
    everything = [_parse(p) for p in module_files(directory)]
    locals_declared = set(local_values(directory))
    used_locals = set().union(*(_refs(doc, r"\blocal\.([A-Za-z_][A-Za-z0-9_]*)") for doc in everything))
    assert used_locals <= locals_declared, sorted(used_locals - locals_declared)
    declared_resources = {f"{t}.{n}" for t, n in resources(directory)}
    declared_data = {f"data.{t}.{n}" for t, n in resources(directory, "data")}
    for doc in everything:
        for ref in _refs(doc, r"(?<![\w.])(aws_[a-z0-9_]+\.[a-z0-9_]+)\.(?:[a-z]|\[)"):
            assert ref in declared_resources, f"{directory.name}: reference to undeclared resource {ref}"
        for ref in _refs(doc, r"\b(data\.aws_[a-z0-9_]+\.[a-z0-9_]+)"):
            assert ref in declared_data, f"{directory.name}: reference to undeclared data source {ref}"


def test_every_module_input_exists_and_required_inputs_are_given() -> None:
    for name, body in named(DEV, "module").items():
        source = (DEV / unquote(body["source"])).resolve()
        assert source in [p.resolve() for p in MODULES.values()], f"module {name}: unknown source {source}"
        variables = named(source, "variable")
        given = set(body) - META_ARGS
        assert given <= set(variables), f"module {name}: inputs not declared in {source.name}: {sorted(given - set(variables))}"
        required = {v for v, spec in variables.items() if "default" not in spec}
        assert required <= given, f"module {name}: required inputs missing: {sorted(required - given)}"


def test_module_output_references_exist() -> None:
    modules = named(DEV, "module")
    outputs_of = {name: set(named((DEV / unquote(b["source"])).resolve(), "output")) for name, b in modules.items()}
    for path in module_files(DEV):
        for module_name, output in re.findall(r"\bmodule\.([a-z0-9_]+)\.([a-z0-9_]+)", json.dumps(_parse(path))):
            assert module_name in outputs_of, f"{path.name}: unknown module {module_name}"
            assert output in outputs_of[module_name], f"{path.name}: module {module_name} has no output {output}"


def test_outputs_the_python_side_reads_exist() -> None:
    outputs = set(named(DEV, "output"))
    assert set(TERRAFORM_OUTPUT_KEYS) <= outputs, sorted(set(TERRAFORM_OUTPUT_KEYS) - outputs)
    example = json.loads((DEV / "outputs.example.json").read_text())
    assert set(example) == outputs, "outputs.example.json must mirror outputs.tf"
    for entry in example.values():
        assert set(entry) == {"sensitive", "type", "value"}  # the shape of `terraform output -json`


def test_example_outputs_agree_with_the_names_terraform_computes() -> None:
    example = {k: v["value"] for k, v in json.loads((DEV / "outputs.example.json").read_text()).items()}
    names = dev_names(example["aws_region"])
    assert example["rollout_function_name"] == names["function_name"]
    assert example["rollout_role_name"] == names["role_name"]
    assert example["artifacts_bucket"] == names["bucket"]
    assert example["s3_prefix"] == names["s3_prefix"]
    assert example["rollout_function_arn"].endswith(f":function:{names['function_name']}")


# ---------------------------------------------------------------------------------------------
# security bars


def _policy_statements(directory: Path, document: str) -> list[dict[str, Any]]:
    return resources(directory, "data")[("aws_iam_policy_document", document)]["statement"]


def test_lambda_role_is_least_privilege() -> None:
    module = MODULES["rollout_lambda"]
    res = resources(module)
    statements = _policy_statements(module, "rollout")
    assert statements
    allowed_wildcards = (":log-stream:*", "/weights/*", "/trajectories/*")
    for statement in statements:
        assert unquote(statement["effect"]) == "Allow"
        for action in statement["actions"]:
            assert "*" not in unquote(action), f"wildcard action {action}"
        for resource in statement["resources"]:
            text = unquote(resource)
            assert text != "*", "a bare * resource"
            if "*" in text:
                assert text.count("*") == 1 and text.endswith(allowed_wildcards), f"broad resource {text}"
            # Every resource is the function's own log group or its own S3 prefix.
            assert "aws_cloudwatch_log_group.rollout.arn" in text or "local.prefix" in text, text
    actions = {unquote(a) for s in statements for a in s["actions"]}
    assert actions == {"logs:CreateLogStream", "logs:PutLogEvents", "s3:GetObject", "s3:PutObject"}
    # No managed policy (AWSLambdaBasicExecutionRole allows logs on every group).
    assert not [k for k in res if k[0] == "aws_iam_role_policy_attachment"]
    assert "data.aws_iam_policy_document.rollout.json" in res[("aws_iam_role_policy", "rollout")]["policy"]
    trust = _policy_statements(module, "assume_lambda")[0]
    assert unquote(trust["principals"][0]["identifiers"][0]) == "lambda.amazonaws.com"


def test_lambda_function_is_configurable_and_logs_are_retained() -> None:
    module = MODULES["rollout_lambda"]
    res = resources(module)
    function = res[("aws_lambda_function", "rollout")]
    assert function["memory_size"] == "${var.memory_mb}"
    assert function["timeout"] == "${var.timeout_s}"
    assert function["reserved_concurrent_executions"] == "${var.reserved_concurrency}"
    assert function["architectures"] == ["${var.architecture}"]
    assert function["filename"] == "${var.package_zip_path}"
    assert "var.package_zip_path" in function["source_code_hash"]
    assert "memory_size" in json.dumps(function["lifecycle"])  # the tuner owns memory after apply
    log_group = res[("aws_cloudwatch_log_group", "rollout")]
    assert log_group["retention_in_days"] == "${var.log_retention_days}"
    assert unquote(log_group["name"]) == "/aws/lambda/${var.name}"
    arch = named(module, "variable")["architecture"]
    assert "x86_64" in json.dumps(arch["validation"]) and "arm64" in json.dumps(arch["validation"])


def test_the_function_and_its_layer_run_the_python_the_layer_is_built_for() -> None:
    module = MODULES["rollout_lambda"]
    assert variable_defaults(module)["runtime"] == LAMBDA_RUNTIME == "python3.12"
    res = resources(module)
    assert res[("aws_lambda_function", "rollout")]["runtime"] == "${var.runtime}"
    assert res[("aws_lambda_layer_version", "deps")]["compatible_runtimes"] == ["${var.runtime}"]
    assert "runtime" not in named(DEV, "module")["rollout_lambda"]  # dev takes the module's default


def test_bucket_is_encrypted_private_versioned_and_expires_trajectories() -> None:
    res = resources(MODULES["artifacts_bucket"])
    block = res[("aws_s3_bucket_public_access_block", "artifacts")]
    for flag in ("block_public_acls", "block_public_policy", "ignore_public_acls", "restrict_public_buckets"):
        assert block[flag] is True, flag
    sse = res[("aws_s3_bucket_server_side_encryption_configuration", "artifacts")]
    algorithm = unquote(sse["rule"][0]["apply_server_side_encryption_by_default"][0]["sse_algorithm"])
    assert algorithm in ("AES256", "aws:kms")
    versioning = res[("aws_s3_bucket_versioning", "artifacts")]
    assert unquote(versioning["versioning_configuration"][0]["status"]) == "Enabled"
    rules = res[("aws_s3_bucket_lifecycle_configuration", "artifacts")]["rule"]
    trajectory_rules = [r for r in rules if "trajectories" in unquote(r["filter"][0]["prefix"])]
    assert trajectory_rules and "expiration" in trajectory_rules[0]
    for resource in (block, sse, versioning):
        assert resource["bucket"] == "${aws_s3_bucket.artifacts.id}"


def test_no_security_group_allows_the_world_in_and_imdsv2_is_required() -> None:
    module = MODULES["ec2_nodes"]
    res = resources(module)
    world = ("0.0.0.0/0", "::/0")
    for (rtype, rname), body in res.items():
        if rtype == "aws_vpc_security_group_ingress_rule":
            text = json.dumps(body)
            assert not any(w in text for w in world), f"{rname} opens ingress to the world"
            assert "referenced_security_group_id" in body or body.get("cidr_ipv4") == "${each.value}"
        if rtype == "aws_security_group":
            assert "ingress" not in body, "inline ingress blocks: use aws_vpc_security_group_ingress_rule"
    # The only CIDR-based ingress comes from var.admin_cidrs, empty by default in the module and in dev.
    ssh = res[("aws_vpc_security_group_ingress_rule", "ssh_from_admins")]
    assert "var.admin_cidrs" in ssh["for_each"]
    assert variable_defaults(module)["admin_cidrs"] == [] and variable_defaults(DEV)["admin_cidrs"] == []
    assert "validation" in named(module, "variable")["admin_cidrs"]
    # Egress: HTTPS only, plus the data-service ports inside the group.
    for (rtype, _), body in res.items():
        if rtype == "aws_vpc_security_group_egress_rule" and "cidr_ipv4" in body:
            assert body["from_port"] == 443 and body["to_port"] == 443
    for path in sorted(TF.rglob("*.tf")):
        text = path.read_text()
        assert not ('"0.0.0.0/0"' in text and "ingress" in text), f"{path}: world CIDR next to ingress"
    for body in res.values():
        for options in body.get("metadata_options", []):
            assert unquote(options["http_tokens"]) == "required"
    assert res[("aws_launch_template", "node")]["metadata_options"], "launch template must set IMDSv2"


def _by_action(document: str) -> dict[tuple[str, str], set[str]]:
    """{(effect, action): resources} of one of the ec2_nodes module's policy documents, with the
    statements of the documents it includes (``source_policy_documents``)."""
    docs = resources(MODULES["ec2_nodes"], "data")
    body = docs[("aws_iam_policy_document", document)]
    statements = list(body.get("statement", []))
    for source in body.get("source_policy_documents", []):
        for ref in re.findall(r"data\.aws_iam_policy_document\.(\w+)\.json", json.dumps(source)):
            statements += docs[("aws_iam_policy_document", ref)]["statement"]
    out: dict[tuple[str, str], set[str]] = {}
    for statement in statements:
        for action in statement["actions"]:
            out.setdefault((unquote(statement["effect"]), unquote(action)), set()).update(unquote(r) for r in statement["resources"])
    return out


def test_node_roles_only_do_what_their_node_does() -> None:
    bucket, token = "${var.artifacts_bucket_arn}", "${aws_ssm_parameter.agent_token.arn}"
    for document in ("learner", "ingest"):
        for (_, action), found in _by_action(document).items():
            assert "*" not in action and "*" not in found, (document, action)
    # ingestion nodes: read the wheels and their token, nothing more (no function, no writes, no deletes)
    assert _by_action("ingest") == {("Allow", "s3:GetObject"): {f"{bucket}/wheels/*"},
                                    ("Allow", "ssm:GetParameter"): {token}}
    # the learner: the bucket's objects but never the wheels, no deletes of its own (the caller
    # policy deletes trajectories under the rollout prefix only), and the token
    assert _by_action("learner") == {("Allow", "s3:GetObject"): {f"{bucket}/*"}, ("Allow", "s3:PutObject"): {f"{bucket}/*"},
                                     ("Allow", "s3:ListBucket"): {bucket},
                                     ("Deny", "s3:PutObject"): {f"{bucket}/wheels/*"},
                                     ("Deny", "s3:DeleteObject"): {f"{bucket}/wheels/*"},
                                     ("Allow", "ssm:GetParameter"): {token}}
    res = resources(MODULES["ec2_nodes"])
    assert res[("aws_iam_role_policy_attachment", "rollout_caller")]["role"] == "${aws_iam_role.learner.name}"
    assert not [k for k in res if k[0] == "aws_iam_role_policy_attachment" and k[1] != "rollout_caller"], \
        "no managed policy (AmazonSSMManagedInstanceCore reads every SSM parameter)"
    session = {a for (_, a) in _by_action("session_manager")}
    assert not {a for a in session if a.startswith("ssm:Get") or a.startswith("s3:")}


def test_the_agent_token_is_generated_into_a_secure_string() -> None:
    res = resources(MODULES["ec2_nodes"])
    parameter = res[("aws_ssm_parameter", "agent_token")]
    assert unquote(parameter["type"]) == "SecureString"
    assert parameter["value"] == "${random_password.agent_token.result}"
    assert res[("random_password", "agent_token")]["length"] >= 32
    assert "TRAINWISE_AGENT_TOKEN_PARAMETER=${token_parameter}" in (MODULES["ec2_nodes"] / "node_agent.sh.tftpl").read_text()


def test_the_plots_expire() -> None:
    rules = resources(MODULES["artifacts_bucket"])[("aws_s3_bucket_lifecycle_configuration", "artifacts")]["rule"]
    plots = [r for r in rules if unquote(r["filter"][0]["prefix"]) == "plots/"]
    from tasks.plots import PLOTS_PREFIX

    assert PLOTS_PREFIX == "plots" and plots and unquote(plots[0]["status"]) == "Enabled"
    assert plots[0]["expiration"][0]["days"] == "${var.plots_expire_days}"


def _role_architecture(instance_type: str) -> str:
    """The ec2_nodes module's rule, evaluated here: its regex (RE2 and Python agree on it) on the
    instance family, unless var.architectures names the type (empty by default)."""
    locals_ = local_values(MODULES["ec2_nodes"])
    rule = unquote(locals_["arm64_family"])
    expected = ('for role, spec in local.roles : role => lookup(var.architectures, spec.instance_type, '
                'can(regex(local.arm64_family, split(".", spec.instance_type)[0])) ? "arm64" : "x86_64")')
    assert locals_["role_architecture"].strip("${} ") == expected
    return "arm64" if re.fullmatch(rule, instance_type.split(".")[0]) else "x86_64"


def test_each_pool_gets_an_ami_of_its_instance_types_architecture() -> None:
    """A plan with c7g and c7i pools: the c7g pool's AMI is arm64, the c7i pool's x86_64."""
    assert _role_architecture("c7g.2xlarge") == "arm64" and _role_architecture("c7i.large") == "x86_64"
    for arm in ("c7gn.xlarge", "m6gd.large", "t4g.micro", "x2gd.large", "im4gn.large", "hpc7g.4xlarge", "a1.large", "g5g.xlarge"):
        assert _role_architecture(arm) == "arm64", arm
    for x86 in ("m7i-flex.large", "c6a.large", "g5.xlarge", "r7iz.large", "inf2.xlarge", "t3.micro", "c5n.large"):
        assert _role_architecture(x86) == "x86_64", x86
    catalog = json.loads((ROOT / "ingestion" / "cluster" / "data" / "instances.json").read_text())["families"]
    for family, words in catalog.items():  # every family InTuneX may plan
        assert _role_architecture(f"{family}.large") == ("arm64" if "Graviton" in words else "x86_64"), family
    locals_ = local_values(MODULES["ec2_nodes"])
    assert "data.aws_ssm_parameter.al2023[arch].value" in locals_["role_ami"]
    ami = resources(MODULES["ec2_nodes"], "data")[("aws_ssm_parameter", "al2023")]
    assert unquote(ami["name"]).endswith("al2023-ami-kernel-default-${each.key}") and ami["for_each"] == "${local.looked_up_amis}"
    assert resources(MODULES["ec2_nodes"])[("aws_launch_template", "node")]["image_id"] == "${local.role_ami[each.key]}"


@pytest.mark.skipif(shutil.which("terraform") is None, reason="no terraform binary (fmt check is optional)")
def test_terraform_fmt_is_clean() -> None:
    proc = subprocess.run(["terraform", "fmt", "-check", "-recursive", str(TF)], capture_output=True, text=True)
    assert proc.returncode == 0, proc.stdout + proc.stderr


def test_every_node_instance_is_hardened_itself_not_only_its_launch_template() -> None:
    """IMDSv2, an encrypted root volume and the instance profile hold even if the template changes."""
    module = MODULES["ec2_nodes"]
    res = resources(module)
    instance = res[("aws_instance", "node")]
    options = instance["metadata_options"][0]
    assert unquote(options["http_tokens"]) == "required"
    assert options["http_put_response_hop_limit"] == 1
    assert instance["root_block_device"][0]["encrypted"] is True
    assert instance["iam_instance_profile"] == ('${startswith(each.value, "ingest") ? aws_iam_instance_profile.ingest.name '
                                                ': aws_iam_instance_profile.learner.name}')
    assert instance["ebs_optimized"] is True
    template = res[("aws_launch_template", "node")]
    assert template["block_device_mappings"][0]["ebs"][0]["encrypted"] is True
    for role in ("learner", "ingest"):
        assert res[("aws_iam_instance_profile", role)]["role"] == f"${{aws_iam_role.{role}.name}}"


SKIP = re.compile(r"#\s*checkov:skip=([0-9A-Z_]+):(.*)")


def test_every_checkov_skip_gives_its_reason_and_is_listed_in_the_docs() -> None:
    skips: dict[str, str] = {}
    for path in sorted(TF.rglob("*.tf")):
        for line in path.read_text().splitlines():
            match = SKIP.search(line)
            if match:
                skips[match.group(1)] = match.group(2).strip()
    assert skips, "expected the documented skips"
    aws_doc = (ROOT / "docs" / "aws.md").read_text()
    for check, reason in skips.items():
        assert len(reason.split()) >= 8, f"{check}: the skip needs a real reason, got {reason!r}"
        assert check in aws_doc, f"{check} is skipped in infra/terraform but not listed in docs/aws.md"
    # The checks the hardening fixes are never skipped.
    assert not {"CKV_AWS_79", "CKV_AWS_8", "CKV2_AWS_41", "CKV_AWS_135", "CKV_AWS_126"} & set(skips)


# ---------------------------------------------------------------------------------------------
# validation of the root variables, evaluated in Python

_NO_VALUE = object()  # what a failing Terraform function gives: can() turns it into false


def _cidrhost(cidr: str, host: int) -> Any:
    try:
        return ipaddress.ip_network(cidr, strict=False)[host]
    except ValueError:
        return _NO_VALUE


_FUNCTIONS: dict[str, Any] = {
    "can": lambda value: value is not _NO_VALUE,
    "regex": lambda pattern, text: re.search(pattern, text) or _NO_VALUE,
    "contains": lambda items, value: value in items,
    "endswith": lambda text, suffix: text.endswith(suffix),
    "floor": math.floor,
    "alltrue": all,
    "tonumber": float,
    "split": lambda separator, text: text.split(separator),
    "cidrhost": _cidrhost,
}


def _for_expressions(text: str) -> str:
    """``[for x in xs : body]`` -> ``[(body) for x in xs]`` (bodies may hold brackets and strings)."""
    start = text.find("[for ")
    if start < 0:
        return text
    depth, in_string = 0, False
    for end in range(start, len(text)):
        char = text[end]
        if char == '"' and text[end - 1] != "\\":
            in_string = not in_string
        elif not in_string and char in "[]":
            depth += 1 if char == "[" else -1
            if depth == 0:
                break
    header, _, body = text[start + 1:end].partition(" : ")
    return text[:start] + f"[({_for_expressions(body)}) {header}]" + _for_expressions(text[end + 1:])


def _python(condition: str) -> str:
    """A validation condition made only of the functions and operators above, as Python."""
    text = unquote(condition)
    text = text[2:-1] if text.startswith("${") and text.endswith("}") else text
    text = _for_expressions(text).replace("&&", " and ").replace("||", " or ")
    return re.sub(r"!(?!=)", " not ", text)


def accepts(directory: Path, name: str, value: Any) -> bool:
    """Whether every validation of variable ``name`` accepts ``value``."""
    spec = named(directory, "variable")[name]
    if isinstance(value, list):
        value = [types.SimpleNamespace(**v) if isinstance(v, dict) else v for v in value]
    var = types.SimpleNamespace(**{name: value})
    scope = {"__builtins__": {}, **_FUNCTIONS, "var": var}  # globals: a comprehension sees them
    return all(eval(_python(v["condition"]), scope) for v in spec["validation"])  # noqa: S307


# name: (values it accepts, values it rejects)
ROOT_VARIABLE_DOMAINS: dict[str, tuple[list[Any], list[Any]]] = {
    "region": (["us-east-1", "eu-west-1", "ap-southeast-2", "us-gov-west-1"], ["", "US-EAST-1", "useast1", "eu-west"]),
    "environment": (["dev", "staging", "team-a1", "a" * 15], ["", "Dev", "dev_1", "-dev", "dev-", "a" * 16]),
    "package_zip_path": (["build/rollout.zip", "/abs/rollout.zip"], ["", "build/rollout.tar.gz"]),
    "layer_zip_path": (["", "build/rollout-deps-layer-arm64.zip"], ["build/layer", "layer.zip.bak"]),
    "lambda_architecture": (["x86_64", "arm64"], ["", "aarch64", "sparc"]),
    "lambda_memory_mb": ([128, 1769, 10240], [0, 64, 127, 10241, 1769.5]),
    "lambda_timeout_s": ([1, 300, 900], [0, -1, 901, 2.5]),
    "lambda_reserved_concurrency": ([-1, 0, 20, 1000], [-2, 2.5]),
    "log_retention_days": ([1, 14, 365, 3653], [0, 2, 13, 10000]),
    "s3_prefix": (["rollouts", "team/a/rollouts", "runs_2.v1"], ["", "/rollouts", "rollouts/", "a//b", "a b"]),
    "trainwise_wheel_sha256": (["", "0" * 64, "ab" * 32], ["abc", "g" * 64, "A" * 64, "0" * 65]),
    "trajectories_expire_days": ([1, 3, 30], [0, -1, 1.5]),
    "vpc_id": (["", "vpc-0123abcd", "vpc-0123456789abcdef0"], ["vpc-123", "0123456789abcdef0", "vpc-XYZ12345"]),
    "subnet_id": (["", "subnet-0123abcd", "subnet-0123456789abcdef0"], ["subnet-1", "vpc-0123abcd"]),
    "learner_instance_type": (["c7i.large", "c7i-flex.large", "u-6tb1.metal"], ["", "c7i", "C7I.LARGE", "large"]),
    "learner_count": ([0, 1, 8], [-1, 1.5]),
    "ingest_instance_type": (["c7i.large", "m7g.xlarge"], ["", "c7i"]),
    "ingest_count": ([0, 1, 4], [-1, 0.5]),
    "ingest_pools": ([[], [{"instance_type": "c7i.large", "count": 2}]],
                     [[{"instance_type": "c7i.large", "count": 0}], [{"instance_type": "large", "count": 1}],
                      [{"instance_type": "c7i.large", "count": 1.5}]]),
    "admin_cidrs": ([[], ["10.0.0.0/16"], ["203.0.113.7/32", "2001:db8::/48"]],
                    [["0.0.0.0/0"], ["10.0.0.0/8"], ["not-a-cidr"], ["::/0"]]),
}


def test_every_root_variable_with_a_bounded_domain_is_validated() -> None:
    variables = named(DEV, "variable")
    bounded = {name for name, spec in variables.items() if spec["type"] not in ("bool", "${bool}")}
    assert bounded == set(ROOT_VARIABLE_DOMAINS), sorted(bounded ^ set(ROOT_VARIABLE_DOMAINS))
    for name in bounded:
        for validation in variables[name].get("validation", []):
            assert len(unquote(validation["error_message"]).split()) >= 4, f"{name}: say what is allowed"
        assert variables[name].get("validation"), f"envs/dev variable {name} has no validation block"


@pytest.mark.parametrize("name", sorted(ROOT_VARIABLE_DOMAINS))
def test_root_variable_validations_accept_the_domain_and_reject_the_rest(name: str) -> None:
    good, bad = ROOT_VARIABLE_DOMAINS[name]
    assert accepts(DEV, name, variable_defaults(DEV)[name]), f"{name}: its own default is rejected"
    assert [v for v in good if not accepts(DEV, name, v)] == [], f"{name}: rejects valid values"
    assert [v for v in bad if accepts(DEV, name, v)] == [], f"{name}: accepts invalid values"


def test_the_lambda_module_takes_only_an_amazon_linux_2023_python_runtime() -> None:
    module = MODULES["rollout_lambda"]
    assert all(accepts(module, "runtime", r) for r in ("python3.12", "python3.13", LAMBDA_RUNTIME))
    assert not any(accepts(module, "runtime", r) for r in ("python3.11", "python3.9", "python3.120", "nodejs22.x"))


# ---------------------------------------------------------------------------------------------
# shared state


def test_dev_shows_an_s3_backend_with_native_locking_as_a_partial_configuration() -> None:
    versions = (DEV / "versions.tf").read_text()
    assert re.search(r'^\s*#\s*backend "s3" \{\}\s*$', versions, re.MULTILINE), "the commented S3 backend block"
    assert "terraform" in _parse(DEV / "versions.tf") and "backend" not in json.dumps(_parse(DEV / "versions.tf"))
    example = DEV / "backend.hcl.example"
    with open(example) as handle:
        settings = {k: unquote(v) for k, v in _strip_comments(hcl2.load(handle)).items()}
    assert {"bucket", "key", "region", "use_lockfile", "encrypt"} <= set(settings)
    assert settings["use_lockfile"] is True and settings["encrypt"] is True
    assert "dynamodb_table" not in settings  # DynamoDB locking is deprecated in favour of use_lockfile
    assert settings["key"].endswith(".tfstate")
    assert "-backend-config=backend.hcl" in example.read_text()


def test_the_caller_policy_drives_only_the_functions_aliases_and_payloads() -> None:
    """The rollout module's caller policy (what the Lambda backend calls): invokes only the
    backend's memory-size aliases, changes only its own function, moves payloads only under
    its own prefix, deletes no version or alias; the nodes' role gets it by attachment."""
    from serverless.backends.lambda_backend import ALIAS_PREFIX

    function = "${aws_lambda_function.rollout.arn}"
    by_action: dict[str, set[str]] = {}
    for statement in _policy_statements(MODULES["rollout_lambda"], "caller"):
        assert unquote(statement["effect"]) == "Allow"
        for action in statement["actions"]:
            by_action.setdefault(unquote(action), set()).update(unquote(r) for r in statement["resources"])
    assert by_action.pop("lambda:InvokeFunction") == {f"{function}:{ALIAS_PREFIX}*"}
    assert by_action.pop("lambda:GetFunctionConfiguration") == {function, f"{function}:*"}
    for action in ("UpdateFunctionConfiguration", "PublishVersion", "GetAlias", "CreateAlias", "UpdateAlias"):
        assert by_action.pop(f"lambda:{action}") == {function}, action
    prefix = "${var.artifacts_bucket_arn}/${local.prefix}"
    assert by_action.pop("s3:PutObject") == {f"{prefix}/weights/*"}
    assert by_action.pop("s3:GetObject") == by_action.pop("s3:DeleteObject") == {f"{prefix}/trajectories/*"}
    assert by_action == {}, f"actions the backend does not call: {sorted(by_action)}"
    nodes = resources(MODULES["ec2_nodes"])[("aws_iam_role_policy_attachment", "rollout_caller")]
    assert nodes["policy_arn"] == "${var.caller_policy_arn}"
    assert not [a for doc in ("learner", "ingest") for (_, a) in _by_action(doc) if a.startswith("lambda:")], \
        "the nodes' own policies must not widen the caller policy"
