"""prefect.yaml: its deployments load, point at existing flows with parameters those
flows accept, name valid workload files, and carry a valid schedule; `trainwise serve`
checks them and refuses to serve without a server (schedules would never fire)."""

from __future__ import annotations

import inspect
import os
from pathlib import Path

import pytest
import yaml

from flows.deployments import load_deployments
from core.errors import UserError

ROOT = Path(__file__).resolve().parents[2]
PREFECT_YAML = ROOT / "prefect.yaml"


def test_deployments_point_at_the_flows() -> None:
    entries = load_deployments(PREFECT_YAML)
    assert {e.flow.name for e in entries} == {"optimize", "seraph", "intune", "intunex"}
    for e in entries:
        accepted = set(inspect.signature(e.flow.fn).parameters)
        assert set(e.parameters) <= accepted
        assert (ROOT / e.parameters.get("config", e.parameters.get("request", {}).get("jobs", ""))).is_file()


def test_nightly_retune_is_scheduled() -> None:
    entries = {e.name: e for e in load_deployments(PREFECT_YAML)}
    nightly = entries["nightly-retune"]
    assert nightly.flow.name == "intune"
    assert [s.cron for s in nightly.schedules] == ["0 2 * * *"]
    assert nightly.schedules[0].active
    assert nightly.parameters.get("refresh_profiles") is True


def test_deployments_build_runner_deployments() -> None:
    for e in load_deployments(PREFECT_YAML):
        d = e.to_runner_deployment()
        assert d.name == e.name
        assert d.parameters == e.parameters
        assert len(d.schedules) == len(e.schedules)


def _write(tmp_path: Path, deployment: dict) -> Path:
    doc = yaml.safe_load(PREFECT_YAML.read_text())
    doc["deployments"] = [deployment]
    out = tmp_path / "prefect.yaml"
    out.write_text(yaml.safe_dump(doc))
    return out


@pytest.mark.parametrize(
    ("deployment", "message"),
    [
        ({"name": "x", "entrypoint": "flows/nope.py:nope"}, "does not exist"),
        ({"name": "x", "entrypoint": "flows/seraph.py:not_a_flow"}, "not_a_flow"),
        ({"name": "x", "entrypoint": "flows/seraph.py:seraph", "parameters": {"confg": "x"}}, "not accepted"),
        ({"name": "x", "entrypoint": "flows/seraph.py:seraph", "parameters": {"config": "configs/intune-nightly.yaml"}}, "needs a 'rl' section"),
        ({"name": "x", "entrypoint": "flows/intune.py:intune", "schedules": [{"cron": "61 * * * *"}]}, "invalid schedule"),
        ({"name": "x", "entrypoint": "flows/intune.py:intune", "schedules": [{"cron": "0 2 * * *", "interval": 60}]}, "exactly one"),
    ],
)
def test_bad_deployments_are_named(tmp_path: Path, deployment: dict, message: str) -> None:
    path = _write(tmp_path, deployment)
    with pytest.raises(UserError, match=message):
        load_deployments(path, root=ROOT)


def test_serve_refuses_without_a_server(monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    from trainwise.cli import main

    monkeypatch.chdir(ROOT)
    monkeypatch.setenv("PREFECT_API_URL", "")
    assert main(["serve"]) == 2
    assert "prefect server start" in capsys.readouterr().err
    assert main(["serve", "--dry-run"]) == 0


def test_every_deployment_runs_on_the_process_pool_after_entering_the_checkout() -> None:
    doc = yaml.safe_load(PREFECT_YAML.read_text())
    assert doc["definitions"]["work_pools"]["trainwise_local"]["name"] == "trainwise-local"
    for e in load_deployments(PREFECT_YAML):
        assert e.work_pool == "trainwise-local", e.name
        assert [next(iter(step)) for step in e.pull] == ["flows.deployments.enter_checkout"], e.name


def test_the_pull_step_enters_the_checkout(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    from prefect.utilities.templating import apply_values

    from flows.deployments import enter_checkout

    (step,) = yaml.safe_load(PREFECT_YAML.read_text())["pull"]
    inputs = step["flows.deployments.enter_checkout"]
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("TRAINWISE_ROOT", raising=False)  # unset: the checkout trainwise is imported from
    assert enter_checkout(**apply_values(inputs, dict(os.environ))) == {"directory": str(ROOT)}
    assert Path.cwd() == ROOT and (Path.cwd() / "configs/demo.yaml").is_file()
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("TRAINWISE_ROOT", str(ROOT))
    assert enter_checkout(**apply_values(inputs, dict(os.environ))) == {"directory": str(ROOT)}
    monkeypatch.setenv("TRAINWISE_ROOT", str(tmp_path))
    with pytest.raises(UserError, match="not a trainwise checkout.*TRAINWISE_ROOT"):
        enter_checkout(**apply_values(inputs, dict(os.environ)))


def test_flow_parameters_are_typed_for_the_run_form() -> None:
    from prefect.utilities.callables import parameter_schema

    from flows import get_flow
    from flows.intunex import intunex

    for name in ("optimize", "seraph", "intune"):
        schema = parameter_schema(get_flow(name).fn).model_dump()
        props, defs = schema["properties"], schema["definitions"]
        assert props["config"]["type"] == "string" and props["config"]["default"] == "configs/demo.yaml"
        assert {"$ref": "#/definitions/WorkloadSpec"} in props["workload"]["anyOf"]
        assert props["refresh_profiles"]["type"] == "boolean"
        assert all(p.get("description") for p in props.values()), name  # the form explains each field
        workload = defs["WorkloadSpec"]["properties"]
        assert workload["concurrency"]["enum"] == ["auto", "parallel", "sequential"]
        assert defs["RLSpec"]["properties"]["target_reward"]["type"] == "number"
        assert defs["IngestSpec"]["properties"]["time_budget_s"]["exclusiveMinimum"] == 0
    schema = parameter_schema(intunex.fn).model_dump()
    assert schema["properties"]["request"]["$ref"] == "#/definitions/ClusterRequest"
    assert schema["properties"]["request"]["default"]["jobs"] == "configs/cluster-demo.yaml"
    request = schema["definitions"]["ClusterRequest"]["properties"]
    assert request["objective"]["enum"] == ["throughput-per-usd", "least-cost", "max-throughput"]
    assert request["baselines"]["anyOf"][0]["items"]["enum"] == ["static", "cachew", "intune-fixed", "greedy", "oracle"]


@pytest.mark.parametrize(
    ("request_", "message"),
    [
        ({"jobs": "configs/no-such-jobs.yaml"}, "no such file"),
        ({"jobs": "configs/cluster-demo.yaml", "objective": "fastest"}, r"parameters\.request\.objective"),
        ({"jobs": "configs/cluster-demo.yaml", "budget": 3}, r"parameters\.request\.budget: unknown cluster request field"),
        ({"jobs": None}, r"parameters\.request\.jobs: a jobs file is required"),
    ],
)
def test_a_bad_cluster_request_is_named_before_the_deployment_is_made(tmp_path: Path, request_: dict,
                                                                      message: str) -> None:
    path = _write(tmp_path, {"name": "x", "entrypoint": "flows/intunex.py:intunex", "parameters": {"request": request_}})
    with pytest.raises(UserError, match=message):
        load_deployments(path, root=ROOT)


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        ({"pull": [{"flows.deployments.no_such_step": {}}]}, "not an importable function"),
        ({"pull": "flows.deployments.enter_checkout"}, "a list of steps"),
        ({"work_pool": "trainwise-local"}, "a mapping with a 'name'"),
        ({"parameters": {"workload": {"name": "x", "ingestion": {}}}}, "needs a 'rl' section"),
        ({"parameters": {"workload": {"name": "x", "rl": {"target_reward": "high"}}}}, "rl.target_reward"),
    ],
)
def test_bad_pools_pull_steps_and_workloads_are_named(tmp_path: Path, extra: dict, message: str) -> None:
    path = _write(tmp_path, {"name": "x", "entrypoint": "flows/seraph.py:seraph", **extra})
    with pytest.raises(UserError, match=message):
        load_deployments(path, root=ROOT)


def test_scheduled_deployments_run_one_at_a_time_and_cancel_a_new_run() -> None:
    for e in load_deployments(PREFECT_YAML):
        limit = e.concurrency_limit
        assert limit is not None and limit.limit == 1, e.name
        expected = "CANCEL_NEW" if e.schedules else "ENQUEUE"  # scheduled runs must not pile up
        assert limit.collision_strategy.value == expected, e.name
        d = e.to_runner_deployment()
        assert d.concurrency_limit == 1 and d.concurrency_options.collision_strategy.value == expected


def test_the_deployment_concurrency_reaches_the_server(prefect_harness: None) -> None:
    from prefect.client.orchestration import get_client

    entry = {e.name: e for e in load_deployments(PREFECT_YAML)}["nightly-retune"]
    deployment_id = entry.to_runner_deployment().apply()
    with get_client(sync_client=True) as client:
        stored = client.read_deployment(deployment_id)
    assert stored.global_concurrency_limit is not None and stored.global_concurrency_limit.limit == 1
    assert stored.concurrency_options is not None and stored.concurrency_options.collision_strategy.value == "CANCEL_NEW"


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        ({"schedual": []}, r"unknown key\(s\) \['schedual'\]; allowed: \["),
        ({"triggers": [{"expect": ["x"]}]}, r"unknown key\(s\) \['triggers'\]"),
        ({"concurrency_limit": 0}, "at least 1"),
        ({"concurrency_limit": {"limit": 1, "collision_strategy": "CANCEL_OLD"}}, "one of \\['ENQUEUE', 'CANCEL_NEW'\\]"),
        ({"concurrency_limit": {"limit": 1, "strategy": "ENQUEUE"}}, r"concurrency_limit: unknown key\(s\) \['strategy'\]"),
        ({"concurrency_limit": "one"}, "a count or"),
        ({"paused": "no"}, "true or false"),
    ],
)
def test_unknown_keys_and_bad_limits_are_named(tmp_path: Path, extra: dict, message: str) -> None:
    path = _write(tmp_path, {"name": "x", "entrypoint": "flows/intune.py:intune", **extra})
    with pytest.raises(UserError, match=message):
        load_deployments(path, root=ROOT)


def test_serve_rejects_an_unknown_key_in_one_line(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                  capsys: pytest.CaptureFixture[str]) -> None:
    from trainwise.cli import main

    doc = yaml.safe_load(PREFECT_YAML.read_text())
    doc["deployment"] = doc.pop("deployments")  # a typo at the top
    (tmp_path / "prefect.yaml").write_text(yaml.safe_dump(doc))
    monkeypatch.setenv("PREFECT_API_URL", "")
    assert main(["serve", "--dry-run", "--prefect-file", str(tmp_path / "prefect.yaml")]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "unknown key(s) ['deployment']" in err and "Traceback" not in err
