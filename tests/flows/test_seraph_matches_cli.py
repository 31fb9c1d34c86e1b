"""The ``seraph`` flow runs the steps ``trainwise rl tune`` runs, with the same arguments:
on the same request, in fresh homes, both pilot with the same probe (memory sweep, fewest
functions, the cost objective's stop), store the profile under the same key, make the same
plan and start training the same way (resumed from the pilot's checkpoint, at the planned
shape).

The pilot's timings are measurements, so two pilots never give identical figures: the
pilot runs once for real and both paths receive its profile and checkpoint (the stand-in
records the arguments each path asked the pilot for)."""

from __future__ import annotations

import copy
import json
import shutil
from pathlib import Path
from typing import Any

import yaml

REQUEST: dict[str, Any] = {"env_id": "CartPole-v1", "target_reward": 475, "seed": 0, "max_steps": 8192, "objective": "cost"}


def _pilot_once(monkeypatch: Any, tmp_path: Path) -> list[dict[str, Any]]:
    """Replace the pilot with one real pilot shared by every caller; return the calls' arguments."""
    from optimizers.seraph import pilot

    real_run_pilot, calls, ran = pilot.run_pilot, [], {}
    shared_ckpt = tmp_path / "shared-pilot-checkpoint"

    def run_pilot(workload: Any, backend_name: str, **kwargs: Any) -> Any:
        checkpoint_dir = kwargs.get("checkpoint_dir")
        calls.append({
            "workload": workload.key_dict(), "backend": backend_name, "seed": kwargs.get("seed"),
            "plan": kwargs.get("plan"), "checkpoint": checkpoint_dir is not None,
        })
        if "profile" not in ran:
            ran["profile"] = real_run_pilot(workload, backend_name, **{**kwargs, "backend": None, "checkpoint_dir": shared_ckpt})
        if checkpoint_dir is not None:
            shutil.copytree(shared_ckpt, checkpoint_dir, dirs_exist_ok=True)
        return copy.deepcopy(ran["profile"])

    monkeypatch.setattr(pilot, "run_pilot", run_pilot)
    return calls


def _home(monkeypatch: Any, root: Path) -> None:
    monkeypatch.setenv("TRAINWISE_HOME", str(root / "home"))
    monkeypatch.setenv("TRAINWISE_RUNS", str(root / "runs"))


def _run_flow(tmp_path: Path) -> dict[str, Any]:
    from flows import get_flow

    config = tmp_path / "flow-vs-cli.yaml"
    config.write_text(yaml.safe_dump({"name": "flow-vs-cli", "rl": REQUEST}))
    state = get_flow("seraph")(config=str(config), return_state=True)
    assert state.is_completed(), state.message
    return json.loads((Path(state.result()["run_dir"]) / "seraph" / "result.json").read_text())


def _run_cli(tmp_path: Path) -> dict[str, Any]:
    from trainwise.cli import main

    out = tmp_path / "cli.json"
    argv = ["rl", "tune", "--env", REQUEST["env_id"], "--target-reward", str(REQUEST["target_reward"]),
            "--objective", REQUEST["objective"], "--seed", str(REQUEST["seed"]), "--max-steps", str(REQUEST["max_steps"]),
            "--json-out", str(out)]
    assert main(argv) == 0
    return json.loads(out.read_text())


def _start(result: dict[str, Any]) -> dict[str, Any]:
    """How training started: after the pilot (a "profiling" phase first) or not, and where."""
    phases = result["phases"]
    trained = [p for p in phases if p["phase"] != "profiling"]
    return {"resumed_from_pilot": phases[0]["phase"] == "profiling", "includes_pilot": result["achieved"]["includes_pilot"],
            "first_config": trained[0]["config"], "first_iteration": trained[0]["first_iteration"]}


def test_the_flow_and_rl_tune_profile_plan_and_start_training_alike(prefect_harness, tmp_path, monkeypatch) -> None:
    calls = _pilot_once(monkeypatch, tmp_path)
    _home(monkeypatch, tmp_path / "flow")
    flow = _run_flow(tmp_path)
    _home(monkeypatch, tmp_path / "cli")
    cli = _run_cli(tmp_path)

    assert len(calls) == 2 and calls[0] == calls[1]  # the same pilot asked for, with a checkpoint to resume from
    assert calls[0]["checkpoint"] and calls[0]["plan"].cost_stop_mb == 1769  # the baseline's size stops the cost probe
    assert flow["profile"]["key"] == cli["profile"]["key"]
    assert flow["profile"]["reused"] is False and cli["profile"]["reused"] is False
    for key in ("config", "steps_per_env", "predicted", "baseline", "search_space"):
        assert flow["plan"][key] == cli["plan"][key], key
    assert _start(flow) == _start(cli)
    assert _start(cli)["resumed_from_pilot"] and _start(cli)["first_config"] == cli["plan"]["config"]
