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
TEST_VARS = {"artifacts_bucket_arn": "arn:aws:s3:::tw-artifacts"}


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
    if expr.startswith('"') and expr.endswith('"'):
        return re.sub(r"\$\{([^}]*)\}", lambda m: str(_arith(m[1], variables)), expr[1:-1])
    raise ValueError(f"cannot evaluate {expr!r} statically")


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
                          f"$PRIVATE_IP:{defaults['agent_port']} --worker-ports {ports['from'] + 10}-{ports['to']}"]
    assert "latest/meta-data/local-ipv4" in script and "X-aws-ec2-metadata-token" in script  # IMDSv2
    assert "systemctl enable --now trainwise-node-agent.service" in script
    assert f's3://tw-artifacts/{defaults["trainwise_wheel_key"]}' in script
    assert "User=trainwise" in script  # not root


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
