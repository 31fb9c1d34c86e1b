"""Seraph's tuner on the Lambda backend, end to end: `rl tune --backend lambda` and the
`seraph` flow with `rl.backend: lambda` profile (memory probe + pilot), plan and train.

The control plane is moto's server (configuration updates, published versions, aliases);
the data plane is the in-process stand-in of test_lambda_backend.py, which runs the real
rollout handler for every invoke and answers with Lambda's REPORT line for the version the
request's ``Qualifier`` names. Targets are tiny so each run takes seconds.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import boto3
import pytest
import yaml

from core.errors import UserError
from tests.infra.test_terraform import MODULES, _policy_statements, unquote
from tests.serverless.backends.test_lambda_backend import (  # noqa: F401  (fixtures are used by name)
    _qualifier,
    aws,
    deployed,
    moto_url,
    stand_in_for_every_backend,
)
from trainwise.cli import main as trainwise_main

# CartPole to a mean return of 80: past the pilot (which ends near 50), so training runs at the plan
TARGET = 80


def _homes(monkeypatch: pytest.MonkeyPatch, root: Path) -> None:
    monkeypatch.setenv("TRAINWISE_HOME", str(root / "home"))
    monkeypatch.setenv("TRAINWISE_RUNS", str(root / "runs"))
    monkeypatch.chdir(root)


def _invoked_sizes(planes: list[Any], function_name: str) -> dict[str, int]:
    """Each alias the stand-ins were invoked on, with the memory size of the version behind it."""
    lam = boto3.client("lambda")
    aliases = {_qualifier(r["url"]) for plane in planes for r in plane.requests}
    assert None not in aliases, "an invoke named no qualifier"
    return {a: lam.get_function_configuration(FunctionName=function_name, Qualifier=a)["MemorySize"] for a in aliases}


def _check_run_on_lambda(result: dict[str, Any], planes: list[Any], names: dict[str, Any]) -> None:
    """The run profiled, planned and trained on Lambda: every invoke went to a
    ``trainwise-<MB>mb`` alias of a version at that size, and the figures are labelled."""
    assert result["workload"]["backend"] == "lambda"
    assert result["label"].startswith("measured (time on Lambda); cost: billed or measured")
    assert result["profile"]["reused"] is False
    assert result["achieved"]["reached"] is True
    assert result["achieved"]["lambda_time_label"] == "measured"  # the backend's clock: wall time, not modelled
    assert result["achieved"]["cost_label"] == "billed"  # every invocation had a REPORT line
    sizes = _invoked_sizes(planes, names["function_name"])
    assert sizes and all(alias == f"trainwise-{mb}mb" for alias, mb in sizes.items())
    trained = [p for p in result["phases"] if p["phase"] != "profiling"]
    assert trained and trained[0]["config"] == result["plan"]["config"]  # training started at the plan
    assert {f"trainwise-{p['config']['memory_mb']}mb" for p in trained} <= set(sizes)  # through their aliases
    assert "trainwise-1769mb" in sizes  # the pilot's size


def test_rl_tune_on_lambda_profiles_plans_and_trains(deployed: dict[str, Any], tmp_path: Path,
                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    _homes(monkeypatch, tmp_path)
    planes = stand_in_for_every_backend(monkeypatch)
    out = tmp_path / "tune.json"
    code = trainwise_main(["rl", "tune", "--env", "CartPole-v1", "--target-reward", str(TARGET), "--objective", "speed",
                           "--max-steps", "20000", "--backend", "lambda", "--lambda-config", str(deployed["config_path"]),
                           "--json-out", str(out)])
    assert code == 0
    result = json.loads(out.read_text())
    _check_run_on_lambda(result, planes, deployed["names"])
    # the speed objective probes the memory sizes: each probed size ran on its own version
    probed = [row["memory_mb"] for row in result["profile"]["pilot"]["memory_probe"]["rows"]]
    assert len(probed) >= 2
    sizes = _invoked_sizes(planes, deployed["names"]["function_name"])
    assert {f"trainwise-{mb}mb" for mb in probed} <= set(sizes)
    assert len({boto3.client("lambda").get_alias(FunctionName=deployed["names"]["function_name"], Name=a)["FunctionVersion"]
                for a in sizes}) == len(sizes)  # one version per size
    # The caller policy Terraform grants covers every Lambda call the tuner made, and grants
    # no Lambda action it does not make (UpdateAlias: only when an alias moves to a new version).
    used = {"lambda:" + ("InvokeFunction" if op == "Invoke" else op) for plane in planes for op in plane.operations}
    granted = {unquote(a) for s in _policy_statements(MODULES["rollout_lambda"], "caller") for a in s["actions"]}
    assert used <= granted, sorted(used - granted)
    assert {a for a in granted if a.startswith("lambda:")} - used == {"lambda:UpdateAlias"}


def test_the_seraph_flow_runs_on_lambda(prefect_harness: Any, deployed: dict[str, Any], tmp_path: Path,
                                        monkeypatch: pytest.MonkeyPatch) -> None:
    from flows import get_flow

    _homes(monkeypatch, tmp_path)
    planes = stand_in_for_every_backend(monkeypatch)
    config = tmp_path / "lambda.yaml"
    config.write_text(yaml.safe_dump({"name": "on-lambda", "rl": {
        "env_id": "CartPole-v1", "target_reward": TARGET, "objective": "cost", "max_steps": 20000, "backend": "lambda",
        "backend_options": {"lambda_config": str(deployed["config_path"])}}}))
    state = get_flow("seraph")(config=str(config), return_state=True)
    assert state.is_completed(), state.message
    result = json.loads((Path(state.result()["run_dir"]) / "seraph" / "result.json").read_text())
    _check_run_on_lambda(result, planes, deployed["names"])


def test_rl_tune_on_lambda_without_a_config_says_how_to_get_one(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                                capsys: pytest.CaptureFixture[str]) -> None:
    _homes(monkeypatch, tmp_path)
    out = tmp_path / "plan.json"
    code = trainwise_main(["rl", "tune", "--env", "CartPole-v1", "--target-reward", "475", "--objective", "cost",
                           "--backend", "lambda", "--plan-only", "--json-out", str(out)])
    err = capsys.readouterr().err.strip()
    assert code == 2 and not out.exists()
    assert len(err.splitlines()) == 1 and "Traceback" not in err
    assert ".trainwise/aws.json does not exist" in err
    assert "trainwise infra apply" in err and "--lambda-config" in err


def test_backend_options_are_checked_against_the_backend() -> None:
    from optimizers.seraph.request import SeraphRequest
    from optimizers.spec import RLSpec

    ok = SeraphRequest(env_id="CartPole-v1", target_reward=10, backend="lambda", backend_options={"lambda_config": "a.json"})
    assert ok.backend_options == {"lambda_config": "a.json"}
    with pytest.raises(UserError, match="backend_options: function backend 'lambda' takes no option 'address'"):
        SeraphRequest(env_id="CartPole-v1", target_reward=10, backend="lambda", backend_options={"address": "x"})
    with pytest.raises(UserError, match="backend_options: option 'lambda_config' .* must be a str, got 3"):
        RLSpec(target_reward=10, backend="lambda", backend_options={"lambda_config": 3}).request()
