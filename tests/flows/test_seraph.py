"""The ``seraph`` flow is the orchestrator: one profile, one plan and one train task run,
read back from the Prefect API, and the train task trains the plan task's output."""

from __future__ import annotations

import json
from typing import Any

import yaml

# a target the pilot does not reach, so training runs after it
TINY_RL: dict[str, Any] = {"name": "tiny-seraph", "rl": {"env_id": "CartPole-v1", "target_reward": 475, "seed": 0, "max_steps": 8192}}


def _task_runs(flow_run_id: Any) -> list[Any]:
    from prefect.client.orchestration import get_client
    from prefect.client.schemas.filters import FlowRunFilter, FlowRunFilterId

    with get_client(sync_client=True) as client:
        return client.read_task_runs(flow_run_filter=FlowRunFilter(id=FlowRunFilterId(any_=[flow_run_id])))


def _by_task(runs: list[Any]) -> dict[str, list[Any]]:
    out: dict[str, list[Any]] = {}
    for run in runs:
        out.setdefault(run.name.rsplit("-", 1)[0], []).append(run)  # a run's name is "<task name>-<suffix>"
    return out


def _table(key: str) -> list[dict[str, Any]]:
    from prefect.artifacts import Artifact

    art = Artifact.get(key)
    assert art is not None, f"no artifact {key!r}"
    return json.loads(art.data) if isinstance(art.data, str) else art.data


def test_the_flow_profiles_plans_and_trains_once_each_and_trains_the_plan(prefect_workspace, tmp_path) -> None:
    from flows import get_flow

    config = tmp_path / "tiny-seraph.yaml"
    config.write_text(yaml.safe_dump(TINY_RL))
    state = get_flow("seraph")(config=str(config), return_state=True)
    assert state.is_completed(), state.message

    runs = _by_task(_task_runs(state.state_details.flow_run_id))
    for name in ("profile-rl-workload", "search-rl-configuration", "train-rl-on-functions"):
        assert len(runs.get(name, [])) == 1, (name, sorted(runs))
    (plan_run,), (train_run,) = runs["search-rl-configuration"], runs["train-rl-on-functions"]
    assert plan_run.state.is_completed() and train_run.state.is_completed()
    # Prefect links the train task's input to the plan task run whose result it is
    upstream = {getattr(i, "id", None) for inputs in train_run.task_inputs.values() for i in inputs}
    assert plan_run.id in upstream

    # the plan's shape (the plan table's "chosen" row, from the plan task's output) is the
    # shape the first phase of training ran at (the phases table, from the train task's result)
    chosen = _table("tiny-seraph-seraph-plan")[0]
    # (after a "profiling" phase: the flow ran the pilot, so training resumed from its checkpoint)
    phases = _table("tiny-seraph-seraph-phases")
    assert phases[0]["phase"] == "profiling"
    first_phase = phases[1]
    assert chosen["row"] == "chosen (predicted)"
    assert first_phase["config"] == f"{chosen['actors']}x{chosen['memory_mb']}MB b{chosen['batch']}"


def test_the_flow_records_its_run_and_a_seeds_list_runs_a_sweep(prefect_workspace, tmp_path, monkeypatch) -> None:
    """One run of the flow adds a record to the job's history; with ``rl.seeds`` the flow runs
    one run per seed through the sweep task and reports each seed and the whole bill."""
    from core import paths
    from flows import get_flow

    monkeypatch.setenv("TRAINWISE_HOME", str(tmp_path / "home"))
    one = {"name": "hist-seraph", "rl": {"env_id": "CartPole-v1", "target_reward": 60, "seed": 0}}
    config = tmp_path / "one.yaml"
    config.write_text(yaml.safe_dump(one))
    assert get_flow("seraph")(config=str(config), return_state=True).is_completed()
    assert len(list((paths.home() / "history").glob("*.json"))) == 1

    swept = {"name": "sweep-seraph", "rl": {**one["rl"], "seeds": "1,2"}}
    config.write_text(yaml.safe_dump(swept))
    state = get_flow("seraph")(config=str(config), return_state=True)
    assert state.is_completed(), state.message
    rows = _table("sweep-seraph-seraph-sweep")
    assert [int(r["seed"]) for r in rows] == [1, 2] and all(r["reached"] == "yes" for r in rows)
    assert len(list((paths.home() / "history").glob("*.json"))) == 3
    runs = _by_task(_task_runs(state.state_details.flow_run_id))
    assert len(runs.get("sweep-rl-seeds", [])) == 1 and "train-rl-on-functions" not in runs
