"""The run history: its key, its files, and what a bad file does."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

import pytest

from optimizers.seraph import history as history_mod
from optimizers.seraph.history import FORMAT_VERSION, History, JobKey, Phase, RunRecord, env_source_hash
from serverless.run_shape import RunShape

BASE = dict(env_id="CartPole-v1", env_kwargs={}, target_reward=150.0, ppo={"learning_rate": 3e-4, "gamma": 0.99},
            max_steps=300_000)


def key(**changes: object) -> JobKey:
    return JobKey.of(**{**BASE, **changes})  # type: ignore[arg-type]


def run(k: JobKey, arm: str = "seraph", seed: int = 0, cost: float = 1e-4, at: float = 1.0) -> RunRecord:
    return RunRecord(key=k, seed=seed, arm=arm, objective="cost", source="test", phases=(Phase(RunShape(2, 1769, 4000, 2000)),),
                     reached=True, env_steps=40_000, lambda_time_s=2.0, cost_usd=cost, wall_s=5.0,
                     cost_label="modelled", curve=((4000, -300.0, 1e-5, 0.2),), recorded_at=at)


@pytest.mark.parametrize("change", [
    {"env_id": "Acrobot-v1"},
    {"env_kwargs": {"sutton_barto_reward": True}},
    {"target_reward": 175.0},
    {"ppo": {"learning_rate": 1e-3, "gamma": 0.99}},
    {"max_steps": 100_000},
])
def test_every_part_of_the_key_makes_another_job(change: dict) -> None:
    assert key(**change).id != key().id


def test_the_env_source_is_part_of_the_key(monkeypatch: pytest.MonkeyPatch) -> None:
    before = key()
    monkeypatch.setattr(history_mod, "env_source_hash", lambda env_id: "another-source")
    assert key().id != before.id


def test_a_run_s_own_fields_are_not_part_of_the_key() -> None:
    """The layout and the annealing horizon are the run's configuration; the seed is not in the key."""
    assert key(ppo={**BASE["ppo"], "steps_per_env": 128, "anneal_steps": 5}).id == key().id  # type: ignore[dict-item]


def test_env_source_hash_reads_the_user_module(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    mod = tmp_path / "my_hist_env.py"
    mod.write_text("X = 1\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    first = env_source_hash("my_hist_env:Foo-v0")
    mod.write_text("X = 2\n")
    assert first != "unknown" and env_source_hash("my_hist_env:Foo-v0") != first


def test_registry_envs_hash_their_entry_point_module() -> None:
    assert env_source_hash("CartPole-v1") not in ("", "unknown")
    assert env_source_hash("CartPole-v1") != env_source_hash("Acrobot-v1")


def test_records_round_trip_and_a_changed_key_never_reuses_them(tmp_path: Path) -> None:
    h = History(key(), root=tmp_path)
    h.record(run(h.key, seed=1, at=2.0))
    h.record(run(h.key, seed=0, at=1.0))
    got = h.runs()
    assert [r.seed for r in got] == [0, 1] and got[0] == run(h.key, seed=0, at=1.0)
    assert History(key(target_reward=175.0), root=tmp_path).runs() == []
    with pytest.raises(ValueError):
        h.record(run(key(max_steps=5)))


def test_a_phase_is_written_flat_as_format_version_1_always_was(tmp_path: Path) -> None:
    """A phase is one RunShape and its start, written as the shape's fields beside ``from_env_steps``:
    a file written before the phase held a RunShape reads back unchanged."""
    h = History(key(), root=tmp_path)
    h.record(replace(run(h.key), phases=(Phase(RunShape(2, 1769, 4000, 2000)), Phase(RunShape(8, 1769, 4000, 500), 12_000))))
    data = json.loads(_one_file(tmp_path).read_text())
    assert data["format_version"] == 1 and data["phases"] == [
        {"actors": 2, "memory_mb": 1769, "batch": 4000, "steps_per_env": 2000, "from_env_steps": 0},
        {"actors": 8, "memory_mb": 1769, "batch": 4000, "steps_per_env": 500, "from_env_steps": 12_000},
    ]
    assert History(key(), root=tmp_path).runs()[0].phases[1] == Phase(RunShape(8, 1769, 4000, 500), 12_000)


def _one_file(root: Path) -> Path:
    (path,) = root.glob("*.json")
    return path


@pytest.mark.parametrize("damage,why", [
    (lambda text: text[: len(text) // 2], "truncated or not JSON"),
    (lambda text: text.replace(f'"format_version": {FORMAT_VERSION}', '"format_version": 99'), "format version 99"),
    (lambda text: json.dumps({**json.loads(text), "phases": "nonsense"}), "not a run record"),
    (lambda text: json.dumps({**json.loads(text), "phases": [{"actors": 0, "memory_mb": 1769, "batch": 4000}]}),
     "not a run record (RunShapeError: actors: must be"),
    (lambda text: "\udcff", "unreadable"),
])
def test_a_bad_history_file_is_named_in_one_line_and_ignored(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                                              damage: object, why: str) -> None:
    h = History(key(), root=tmp_path)
    path = h.record(run(h.key))
    text = path.read_text()
    try:
        path.write_text(damage(text))  # type: ignore[operator]
    except UnicodeEncodeError:
        path.write_bytes(b"\xff\xfe{")
    assert h.runs() == [] and h.runs() == []  # read once: the decision and the race see one reading
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and str(path) in err[0] and "ignored" in err[0]
    assert why.split()[0] in err[0] or "unreadable" in err[0]


def test_a_file_recorded_under_another_key_is_ignored(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    h = History(key(), root=tmp_path)
    path = h.record(run(h.key))
    other = replace(h.key, target_reward=1.0)
    data = json.loads(path.read_text())
    data["key"]["target_reward"] = other.target_reward
    path.write_text(json.dumps(data))
    assert h.runs() == [] and "another job key" in capsys.readouterr().err
