"""The ingestion nodes' user data: the template the ec2_nodes module renders (its variables taken
from the module's source and defaults) installs trainwise, generates the built-in pipelines' data
as the live runs expect it, and starts the node agent on the private address and the agent port;
the security group opens that port to the group alone, and the outputs list the agents."""

from __future__ import annotations

import posixpath
import re
import subprocess
from typing import Any

from tests.infra.test_terraform import DEV, MODULES, local_values, named, resources, unquote, variable_defaults

MODULE = MODULES["ec2_nodes"]
SHA = "0123456789abcdef" * 4
TEST_VARS = {"artifacts_bucket_arn": "arn:aws:s3:::tw-artifacts", "name": "tw", "dispatcher_cidr": "10.0.0.0/16",
             "trainwise_wheel_sha256": SHA}


def _arith(expr: str, variables: dict[str, Any]) -> int:
    """``var.a.b + 10``: a sum of numbers and variable fields."""
    total = 0
    for term in (t.strip() for t in expr.split("+")):
        if term.isdigit():
            total += int(term)
            continue
        value: Any = variables
        for part in term.removeprefix("var.").split("."):
            value = value[part]
        total += int(value)
    return total


def _value(expr: str, variables: dict[str, Any]) -> str:
    """One argument of the module's templatefile call; anything this cannot follow fails the test."""
    expr = expr.strip()
    if expr.isdigit():
        return expr
    if m := re.fullmatch(r'element\(split\(":::", var\.(\w+)\), 1\)', expr):
        return variables[m[1]].split(":::")[1]
    if m := re.fullmatch(r"basename\(var\.(\w+)\)", expr):
        return posixpath.basename(variables[m[1]])
    if m := re.fullmatch(r"var\.(\w+)", expr):
        return str(variables[m[1]])
    if m := re.fullmatch(r"aws_ssm_parameter\.(\w+)\.name", expr):  # its name template
        return _value(resources(MODULE)[("aws_ssm_parameter", m[1])]["name"], variables)
    if expr.startswith('"') and expr.endswith('"'):
        return re.sub(r"\$\{([^}]*)\}", lambda m: _field(m[1], variables), expr[1:-1])
    raise ValueError(f"cannot evaluate {expr!r} statically")


def _field(expr: str, variables: dict[str, Any]) -> str:
    """``var.name`` as text, or a sum (``var.a.b + 10``)."""
    if re.fullmatch(r"var\.\w+", expr.strip()) and isinstance(variables[expr.strip()[4:]], str):
        return variables[expr.strip()[4:]]
    return str(_arith(expr, variables))


def _template_args() -> tuple[str, dict[str, str]]:
    call = local_values(MODULE)["ingest_user_data"]
    m = re.fullmatch(r'\$\{templatefile\("\$\{path\.module\}/([\w.]+)", \{(.*)\}\)\}', call, re.S)
    assert m, call
    variables = {**variable_defaults(MODULE), **TEST_VARS}
    pairs = re.split(r",\s*(?=\w+ = )", m[2])
    return m[1], {k.strip(): _value(v, variables) for k, v in (p.split(" = ", 1) for p in pairs)}


def _render() -> str:
    name, args = _template_args()
    text = (MODULE / name).read_text()
    return re.sub(r"(?<!\$)\$\{(\w+)\}", lambda m: args[m[1]], text)  # KeyError: a template variable not passed


def test_the_user_data_starts_the_agent_on_the_private_address_and_the_agent_port() -> None:
    script = _render()
    assert "${" not in script
    subprocess.run(["bash", "-n"], input=script, text=True, check=True)  # it parses as bash
    defaults = variable_defaults(MODULE)
    ports = defaults["data_service_ports"]
    exec_start = [line for line in script.splitlines() if line.startswith("ExecStart=")]
    assert exec_start == [f"ExecStart=/opt/trainwise/bin/trainwise ingest node-agent --listen "
                          f"$PRIVATE_IP:{defaults['agent_port']} --worker-ports {ports['from'] + 10}-{ports['to']} "
                          "--dispatchers 10.0.0.0/16"]
    assert "Environment=TRAINWISE_AGENT_TOKEN_PARAMETER=/tw/node-agent-token" in script  # read by the agent, not in user data
    assert "Environment=AWS_DEFAULT_REGION=$REGION" in script
    assert "latest/meta-data/local-ipv4" in script and "X-aws-ec2-metadata-token" in script  # IMDSv2
    assert "systemctl enable --now trainwise-node-agent.service" in script
    assert f's3://tw-artifacts/{defaults["trainwise_wheel_key"]}' in script
    assert "User=trainwise" in script  # not root


def test_the_wheel_is_installed_only_with_the_expected_sha256_and_only_its_ingest_extra() -> None:
    script = _render()
    wheel = posixpath.basename(variable_defaults(MODULE)["trainwise_wheel_key"])
    lines = script.splitlines()
    check = next(i for i, line in enumerate(lines) if "sha256sum --check --strict" in line)
    install = next(i for i, line in enumerate(lines) if "/opt/trainwise/bin/pip install" in line)
    assert f'echo "{SHA}  /tmp/{wheel}" | sha256sum --check --strict' in lines[check] and check < install
    assert lines[install] == f'/opt/trainwise/bin/pip install "/tmp/{wheel}[ingest]"'
    assert "set -euo pipefail" in script and "exit 1" in "\n".join(lines[check:install])


def test_the_wheel_check_refuses_a_wheel_with_another_hash(tmp_path: Any) -> None:
    """The rendered check itself, run by bash on a file that is not the expected wheel."""
    script = _render()
    wheel = posixpath.basename(variable_defaults(MODULE)["trainwise_wheel_key"])
    lines = script.splitlines()
    check = next(i for i, line in enumerate(lines) if "sha256sum --check --strict" in line)
    end = next(i for i in range(check, len(lines)) if lines[i] == "}")
    snippet = "set -euo pipefail\n" + "\n".join(lines[check:end + 1]).replace(f"/tmp/{wheel}", str(tmp_path / wheel)) + "\necho installed\n"
    (tmp_path / wheel).write_bytes(b"a different wheel")
    bad = subprocess.run(["bash", "-c", snippet], capture_output=True, text=True)
    assert bad.returncode == 1 and "installed" not in bad.stdout and "not installing" in bad.stderr
    import hashlib

    good = snippet.replace(SHA, hashlib.sha256(b"a different wheel").hexdigest())
    assert subprocess.run(["bash", "-c", good], capture_output=True, text=True).stdout.strip().endswith("installed")


def test_the_nodes_generate_the_data_the_live_pipelines_read() -> None:
    from ingestion.cluster.pipelines import ROWS, SHARDS

    _, args = _template_args()
    assert (int(args["data_rows"]), int(args["data_shards"])) == (ROWS, SHARDS)
    script = _render()
    assert f'--out "{args["trainwise_home"]}/intunex-data/$fmt"' in script  # core.paths.cache_dir("intunex-data")
    assert f"Environment=TRAINWISE_HOME={args['trainwise_home']}" in script


def test_only_the_ingestion_roles_run_the_agent() -> None:
    template = resources(MODULE)[("aws_launch_template", "node")]
    assert 'startswith(each.key, "ingest") ? base64encode(local.ingest_user_data)' in template["user_data"]


def test_the_agent_port_is_open_to_the_group_alone_and_the_agents_are_outputs() -> None:
    rules = resources(MODULE)
    for kind, name in (("aws_vpc_security_group_ingress_rule", "agent_from_group"),
                       ("aws_vpc_security_group_egress_rule", "agent_to_group")):
        rule = rules[(kind, name)]
        assert rule["from_port"] == rule["to_port"] == "${var.agent_port}"
        assert rule["referenced_security_group_id"] == "${aws_security_group.nodes.id}" and "cidr_ipv4" not in rule
    out = named(MODULE, "output")["ingest_agent_addresses"]["value"]
    assert "${instance.private_ip}:${var.agent_port}" in unquote(out)
    assert named(DEV, "output")["ingest_agent_addresses"]["value"] == "${module.ec2_nodes.ingest_agent_addresses}"


def test_infra_output_raw_prints_the_agents_for_workers(capsys: Any) -> None:
    from trainwise.cli import main

    example = str(DEV / "outputs.example.json")
    assert main(["infra", "output", "--from-json", example, "--raw", "ingest_agent_addresses"]) == 0
    assert capsys.readouterr().out.strip() == "10.0.1.23:5040"
    assert main(["infra", "output", "--from-json", example, "--raw", "nope"]) == 2
    err = capsys.readouterr().err
    assert "--raw nope: no such output" in err and len(err.strip().splitlines()) == 1
