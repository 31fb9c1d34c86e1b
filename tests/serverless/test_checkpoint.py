"""Checkpoints: one file written atomically, bad files refused clearly, resume at a new shape,
and a resumed run that continues exactly as an uninterrupted one."""

from __future__ import annotations

import io
import json
import os
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from core import atomic
from core.errors import UserError
from serverless import checkpoint as ckpt_module
from serverless import handler as handler_module
from serverless.checkpoint import CHECKPOINT_FILE, read_checkpoint
from serverless.network import NetworkSpec
from serverless.ppo import PPOConfig
from serverless.trainer import TrainSpec, train
from serverless.run_shape import RunShape
from tests.serverless.test_rollouts import Crash, CrashAt, InProcess


def _spec(ckpt: Path, **kw: Any) -> TrainSpec:
    base: dict[str, Any] = dict(
        env_id="CartPole-v1",
        target_reward=1e9,
        max_steps=768,
        run=RunShape(actors=2, memory_mb=1769, batch=256),
        ppo=PPOConfig(epochs=2, minibatch_size=64),
        seed=11,
        checkpoint_every=1,
        checkpoint_dir=ckpt,
    )
    base.update(kw)
    return TrainSpec(**base)


@pytest.fixture(autouse=True)
def _cold() -> None:
    handler_module.reset_warm_state()


def _iteration(ckpt: Path) -> int:
    meta, _ = read_checkpoint(ckpt)
    return int(meta["run_state"]["iteration"])


def test_a_checkpoint_is_one_file_of_plain_data(tmp_path: Path) -> None:
    train(_spec(tmp_path / "c", max_steps=256), backend=InProcess(), progress=False)
    assert sorted(p.name for p in (tmp_path / "c").iterdir()) == [CHECKPOINT_FILE]
    with np.load(tmp_path / "c" / CHECKPOINT_FILE, allow_pickle=False) as data:  # no pickle anywhere
        meta = json.loads(data["meta"].tobytes())
        assert all(data[k].dtype != object for k in data.files)
    assert meta["env_id"] == "CartPole-v1" and meta["run_state"]["iteration"] == 1
    assert meta["learner"]["__dict__"][-1][0] == "rng"  # the learner's numpy RNG state rides along
    assert "torch_rng" in meta


def test_a_crash_between_writes_leaves_the_previous_checkpoint_whole(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    ckpt = tmp_path / "c"
    train(_spec(ckpt, max_steps=256), backend=InProcess(), progress=False)
    before = (ckpt / CHECKPOINT_FILE).read_bytes()

    def crash(src: Any, dst: Any) -> None:
        raise OSError(5, "killed before the rename")

    monkeypatch.setattr(atomic.os, "replace", crash)
    with pytest.raises(UserError, match=f"cannot write {ckpt / CHECKPOINT_FILE}: killed before the rename"):
        train(_spec(ckpt, max_steps=512, resume=True), backend=InProcess(), progress=False)
    monkeypatch.undo()
    assert (ckpt / CHECKPOINT_FILE).read_bytes() == before  # untouched; the half-done one is a temp file
    assert _iteration(ckpt) == 1
    resumed = train(_spec(ckpt, max_steps=512, resume=True), backend=InProcess(), progress=False)
    assert resumed.env_steps == 512 and _iteration(ckpt) == 2
    assert sorted(p.name for p in ckpt.iterdir()) == [CHECKPOINT_FILE]  # the failed write's temp file is gone


def test_a_crash_while_writing_the_arrays_leaves_the_previous_checkpoint(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    ckpt = tmp_path / "c"
    train(_spec(ckpt, max_steps=256), backend=InProcess(), progress=False)

    real_savez = np.savez

    def half_write(fh: Any, **arrays: Any) -> None:
        if isinstance(fh, io.BytesIO):  # the weights sent to the actors: not a file
            return real_savez(fh, **arrays)
        fh.write(b"PK\x03\x04 half a zip")
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(ckpt_module.np, "savez", half_write)
    with pytest.raises(UserError, match="No space left on device"):
        train(_spec(ckpt, max_steps=512, resume=True), backend=InProcess(), progress=False)
    monkeypatch.undo()
    assert _iteration(ckpt) == 1


@pytest.mark.parametrize(
    "damage, match",
    [
        (lambda b: b[: len(b) // 2], "truncated or corrupt"),
        (lambda b: b"not a zip at all", "truncated or corrupt"),
        (lambda b: b[:100] + bytes(200) + b[300:], "truncated or corrupt"),
        (lambda b: b"", "truncated or corrupt"),
    ],
)
def test_a_corrupt_or_truncated_checkpoint_is_a_clear_error(tmp_path: Path, damage: Any, match: str) -> None:
    ckpt = tmp_path / "c"
    train(_spec(ckpt, max_steps=256), backend=InProcess(), progress=False)
    path = ckpt / CHECKPOINT_FILE
    path.write_bytes(damage(path.read_bytes()))
    backend = InProcess()
    with pytest.raises(UserError, match=match):
        train(_spec(ckpt, max_steps=512, resume=True), backend=backend, progress=False)


def test_an_npz_that_is_not_a_checkpoint_is_refused(tmp_path: Path) -> None:
    ckpt = tmp_path / "c"
    ckpt.mkdir()
    np.savez(ckpt / CHECKPOINT_FILE, meta=np.frombuffer(json.dumps({"format": "other"}).encode(), dtype=np.uint8))
    with pytest.raises(UserError, match="not a trainwise checkpoint"):
        train(_spec(ckpt, resume=True), backend=InProcess(), progress=False)
    np.savez(ckpt / CHECKPOINT_FILE, weights=np.zeros(3))
    with pytest.raises(UserError, match="truncated or corrupt"):
        train(_spec(ckpt, resume=True), backend=InProcess(), progress=False)


@pytest.mark.parametrize("part", ["run_state", "learner"])
def test_a_checkpoint_with_a_malformed_part_is_refused(tmp_path: Path, part: str) -> None:
    ckpt = tmp_path / "c"
    train(_spec(ckpt, max_steps=256), backend=InProcess(), progress=False)
    with np.load(ckpt / CHECKPOINT_FILE, allow_pickle=False) as data:
        arrays = {k: data[k] for k in data.files}
    meta = json.loads(arrays["meta"].tobytes())
    meta[part] = {"__dict__": [["model", {"__tensor__": "missing"}]]} if part == "learner" else {"iteration": "x"}
    arrays["meta"] = np.frombuffer(json.dumps(meta).encode(), dtype=np.uint8)
    np.savez(ckpt / CHECKPOINT_FILE, **arrays)
    match = "run state is malformed" if part == "run_state" else "learner state does not fit"
    with pytest.raises(UserError, match=match):
        train(_spec(ckpt, max_steps=512, resume=True), backend=InProcess(), progress=False)


def test_a_checkpoint_of_another_run_is_refused_naming_what_differs(tmp_path: Path) -> None:
    ckpt = tmp_path / "c"
    train(_spec(ckpt, max_steps=256), backend=InProcess(), progress=False)
    before = (ckpt / CHECKPOINT_FILE).read_bytes()
    cases = [
        (dict(env_id="Acrobot-v1"), r'env_id: checkpoint "CartPole-v1", this run "Acrobot-v1"'),
        (dict(ppo=PPOConfig(epochs=2, minibatch_size=64, network=NetworkSpec((32, 32)))), r"ppo.network.hidden: checkpoint \[64, 64\], this run \[32, 32\]"),
        (dict(seed=12), "seed: checkpoint 11, this run 12"),
        (dict(env_kwargs={"sutton_barto_reward": True}), "env_kwargs.sutton_barto_reward: checkpoint null, this run true"),
        (dict(run=RunShape(actors=4, memory_mb=1769, batch=256)), "run.actors: checkpoint 2, this run 4"),
        (dict(seed=12, ppo=PPOConfig(epochs=3, minibatch_size=64)), "ppo.epochs: checkpoint 2, this run 3; seed: checkpoint 11"),
    ]
    for change, match in cases:
        with pytest.raises(UserError, match=match):
            train(_spec(ckpt, resume=True, **change), backend=InProcess(), progress=False)
    assert (ckpt / CHECKPOINT_FILE).read_bytes() == before  # a refused resume writes nothing
    # the budget may grow, and a new run shape is allowed when asked for (resume_run)
    train(_spec(ckpt, resume=True, max_steps=512, run=RunShape(actors=4, memory_mb=1769, batch=256),
                resume_run=RunShape(actors=4, memory_mb=1769, batch=256)), backend=InProcess(), progress=False)
    assert _iteration(ckpt) == 2


def test_a_checkpoint_of_another_activation_is_refused_and_an_older_one_means_tanh(tmp_path: Path) -> None:
    ckpt = tmp_path / "c"
    train(_spec(ckpt, max_steps=256), backend=InProcess(), progress=False)
    with pytest.raises(UserError, match='ppo.network.activation: checkpoint "tanh", this run "relu"'):
        train(_spec(ckpt, max_steps=512, ppo=PPOConfig(epochs=2, minibatch_size=64, network=NetworkSpec((64, 64), "relu")),
                    resume=True), backend=InProcess(), progress=False)
    # a checkpoint written before the activation was part of the policy spec: it was tanh, and resumes
    with np.load(ckpt / CHECKPOINT_FILE, allow_pickle=False) as data:
        arrays = {k: data[k] for k in data.files}
    meta = json.loads(arrays["meta"].tobytes())
    del meta["policy_spec"]["activation"]
    arrays["meta"] = np.frombuffer(json.dumps(meta).encode(), dtype=np.uint8)
    np.savez(ckpt / CHECKPOINT_FILE, **arrays)
    result = train(_spec(ckpt, max_steps=512, resume=True), backend=InProcess(), progress=False)
    assert result.env_steps == 512


def test_the_older_two_file_layout_gets_a_hint(tmp_path: Path) -> None:
    ckpt = tmp_path / "c"
    ckpt.mkdir()
    (ckpt / "learner.pt").write_bytes(b"x")
    (ckpt / "trainer.json").write_text("{}")
    with pytest.raises(UserError, match="no checkpoint .* older two-file layout"):
        train(_spec(ckpt, resume=True), backend=InProcess(), progress=False)


def test_resume_at_a_new_run_shape(tmp_path: Path) -> None:
    ckpt = tmp_path / "c"
    train(_spec(ckpt, max_steps=512), backend=InProcess(), progress=False)
    backend = _Recording()
    new = RunShape(actors=4, memory_mb=1024, batch=128)
    resumed = train(_spec(ckpt, max_steps=768, resume=True, resume_run=new), backend=backend, progress=False)
    assert backend.shapes == [(4, 1024), (4, 1024)]  # 256 more env steps at batch 128
    assert resumed.env_steps == 768 and resumed.iterations[0].run == new
    assert any("instead of the checkpoint's" in n for n in resumed.notes)
    assert resumed.config["resume_run"] == new.to_dict()
    with pytest.raises(UserError, match="actors"):
        train(_spec(ckpt, resume=True, resume_run=RunShape(actors=0)), backend=InProcess(), progress=False)


class _Recording(InProcess):
    def __init__(self) -> None:
        self.shapes: list[tuple[int, int]] = []

    def invoke(self, events: list[dict[str, Any]], memory_mb: int, concurrency: int | None = None) -> Any:
        self.shapes.append((len(events), memory_mb))
        return super().invoke(events, memory_mb, concurrency)


def _learning(result: Any) -> list[tuple[Any, ...]]:
    return [(c["iteration"], c["env_steps"], c["mean_return"], c["episodes"]) for c in result.curve]


def _final_weights(ckpt: Path) -> dict[str, np.ndarray]:
    meta, arrays = read_checkpoint(ckpt)
    model = dict(meta["learner"]["__dict__"])["model"]
    return {name: arrays[ref["__tensor__"]] for name, ref in model["__dict__"]}


@pytest.mark.slow
@pytest.mark.parametrize(
    "backend_name, steps_per_env", [("inprocess", 32), ("local", 32), ("inprocess", 0)],
    ids=["inprocess-slots", "local-slots", "inprocess-one-env-per-function"],
)
def test_a_resumed_run_continues_exactly_as_an_uninterrupted_one(tmp_path: Path, backend_name: str, steps_per_env: int) -> None:
    """Env slots (one env per function included: slot k is function k's env) carry each
    env's episode in progress in the checkpoint, and the learner's RNG states ride along:
    a run crashed after iteration 1 and resumed learns the same."""
    ppo = PPOConfig(epochs=2, minibatch_size=64, steps_per_env=steps_per_env)

    def backend() -> Any:
        if backend_name == "inprocess":
            handler_module.reset_warm_state()
            return InProcess()
        from serverless.backends.local import LocalBackend

        return LocalBackend(max_workers=1)  # new worker processes: cold, as after a kill

    def run(ckpt: Path, controller: Any = None, **kw: Any) -> Any:
        b = backend()
        try:
            return train(_spec(ckpt, ppo=ppo, **kw), backend=b, controller=controller, progress=False)
        finally:
            b.close()

    whole = run(tmp_path / "whole")
    with pytest.raises(Crash):
        run(tmp_path / "crashed", controller=CrashAt(1))
    assert _iteration(tmp_path / "crashed") == 1
    resumed = run(tmp_path / "crashed", resume=True)
    assert _learning(resumed) == _learning(whole)
    assert resumed.env_steps == whole.env_steps and resumed.final_mean_return == whole.final_mean_return
    a, b = _final_weights(tmp_path / "whole"), _final_weights(tmp_path / "crashed")
    assert a.keys() == b.keys() and all(np.array_equal(a[k], b[k]) for k in a)


def test_fsync_and_rename_are_one_unit(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The save ends with one rename of a fsynced file; the directory is fsynced after it."""
    calls: list[str] = []
    real_replace, real_fsync = os.replace, os.fsync
    monkeypatch.setattr(atomic.os, "replace", lambda s, d: (calls.append("replace"), real_replace(s, d))[1])
    monkeypatch.setattr(atomic.os, "fsync", lambda fd: (calls.append("fsync"), real_fsync(fd))[1])
    train(_spec(tmp_path / "c", max_steps=256), backend=InProcess(), progress=False)
    assert calls == ["fsync", "replace", "fsync"] * 2  # at iteration 0 and after the one iteration


def test_a_run_killed_in_its_first_iteration_resumes(tmp_path: Path) -> None:
    ckpt = tmp_path / "c"
    with pytest.raises(Crash):
        train(_spec(ckpt), backend=InProcess(), controller=CrashAt(0), progress=False)
    assert _iteration(ckpt) == 0
    resumed = train(_spec(ckpt, resume=True), backend=InProcess(), progress=False)
    assert resumed.env_steps == 768 and [c["iteration"] for c in resumed.curve] == [0, 1, 2]
