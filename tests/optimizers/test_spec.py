"""Workload specs: the example configs validate; bad files fail with a message that
names the field, before Prefect (or any task) starts."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from core.errors import UserError
from optimizers.spec import load_spec, parse_spec

ROOT = Path(__file__).resolve().parents[2]
CONFIGS = sorted((ROOT / "configs").glob("*.yaml"))
JOBS_FILES = [p for p in CONFIGS if p.name.startswith("cluster-")]  # InTuneX jobs files, not workloads
WORKLOADS = [p for p in CONFIGS if p not in JOBS_FILES]


@pytest.mark.parametrize("path", WORKLOADS, ids=[p.name for p in WORKLOADS])
def test_example_configs_validate(path: Path) -> None:
    spec = load_spec(path)
    assert spec.rl is not None or spec.ingestion is not None


@pytest.mark.parametrize("path", JOBS_FILES, ids=[p.name for p in JOBS_FILES])
def test_example_jobs_files_validate(path: Path) -> None:
    from ingestion.cluster.jobs import load_jobs

    assert load_jobs(path).jobs


def test_demo_names_both_branches() -> None:
    spec = load_spec(ROOT / "configs/demo.yaml")
    assert spec.rl is not None and spec.ingestion is not None
    assert spec.name == "demo"


def _demo() -> dict:
    return yaml.safe_load((ROOT / "configs/demo.yaml").read_text())


@pytest.mark.parametrize(
    ("edit", "field", "hint"),
    [
        (lambda d: d["rl"].update(target_reward="high"), "rl.target_reward", "number"),
        (lambda d: d["rl"].update(objective="cheapest"), "rl.objective", "allowed: cost, speed, balanced"),
        (lambda d: d["rl"].update(target_reword=100), "rl.target_reword", "allowed fields here"),
        (lambda d: d["rl"].update(env_id="NoSuchEnv-v0"), "rl.env_id", "not in gymnasium's registry"),
        (lambda d: d["rl"].update(env_id="no_such_user_module:Beacon-v0"), "rl.env_id", "could not be imported"),
        (lambda d: d["rl"].update(env_kwargs=[1]), "rl.env_kwargs", "dictionary"),
        (lambda d: d["rl"].update(env_kwargs={"speed": {1, 2}}), "rl.env_kwargs", "plain JSON values"),
        (lambda d: d["rl"].update(max_steps=10), "rl.max_steps", "must be at least 1000 env steps"),
        (lambda d: d["rl"].update(backend="gpu"), "rl.backend", "unknown function backend 'gpu'; allowed: local, ray"),
        (lambda d: d["rl"].update(backend="lambda", backend_options={"address": "x"}), "rl.backend_options",
         "function backend 'lambda' takes no option 'address'; its options: lambda_config"),
        (lambda d: d["rl"].update(architecture="mips"), "rl.architecture", "allowed: x86_64, arm64"),
        (lambda d: d["rl"].update(baseline_config="actors=two,memory=1769,batch=4000"), "rl.baseline_config",
         "actors: must be a whole number"),
        (lambda d: d["ingestion"].update(baselines=["autotune", "magic"]), "ingestion.baselines",
         "unknown ingestion optimizer 'magic'; allowed: intune, autotune"),
        (lambda d: d["ingestion"].update(optimizer="magic"), "ingestion.optimizer", "unknown ingestion optimizer"),
        (lambda d: d["ingestion"].update(time_budget_s=-1), "ingestion.time_budget_s", "greater than 0"),
        (lambda d: d.update(name="Demo Run"), "name", "lowercase"),
        (lambda d: d.update(concurrency="some"), "concurrency", "'auto'"),
        (lambda d: d["rl"].pop("target_reward"), "rl.target_reward", "field required"),
    ],
)
def test_bad_field_is_named(edit, field: str, hint: str) -> None:
    data = _demo()
    edit(data)
    with pytest.raises(UserError) as info:
        parse_spec(data, "demo.yaml")
    message = str(info.value)
    assert f"{field}:" in message
    assert hint in message


def test_empty_workload_is_rejected() -> None:
    with pytest.raises(UserError, match="'rl' section, an 'ingestion' section, or both"):
        parse_spec({"name": "x"})


def test_missing_file_and_bad_yaml(tmp_path: Path) -> None:
    with pytest.raises(UserError, match="does not exist"):
        load_spec(tmp_path / "nope.yaml")
    bad = tmp_path / "bad.yaml"
    bad.write_text("rl: [unclosed\n")
    with pytest.raises(UserError, match="not valid YAML"):
        load_spec(bad)
    lst = tmp_path / "list.yaml"
    lst.write_text("- 1\n- 2\n")
    with pytest.raises(UserError, match="must be a YAML mapping"):
        load_spec(lst)


def test_flow_needs_its_section(tmp_path: Path) -> None:
    only_rl = tmp_path / "rl.yaml"
    only_rl.write_text("name: x\nrl: {env_id: CartPole-v1, target_reward: 50}\n")
    load_spec(only_rl, need="rl")
    with pytest.raises(UserError, match="needs a 'ingestion' section"):
        load_spec(only_rl, need="ingestion")


def test_cli_run_rejects_bad_file_without_traceback(tmp_path: Path) -> None:
    data = _demo()
    data["rl"]["objective"] = "cheapest"
    bad = tmp_path / "bad.yaml"
    bad.write_text(yaml.safe_dump(data))
    proc = subprocess.run(
        [sys.executable, "-m", "trainwise", "run", "--config", str(bad)],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        timeout=120,
    )
    assert proc.returncode == 2
    assert "rl.objective" in proc.stderr
    assert "Traceback" not in proc.stderr
    assert not (tmp_path / "runs").exists()  # nothing started, nothing written
