"""Damaged checkpoints, through the trainer's public resume path (``train`` with
``resume=True``): a checkpoint directory whose files are truncated, flipped, replaced,
emptied or deleted, or written by a run of another env, either resumes or stops with a
one-line UserError; never a traceback from torch, numpy or json."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from core.errors import UserError
from serverless.trainer import TrainSpec, train
from serverless.run_shape import RunShape

RUN = RunShape(actors=1, memory_mb=1769, batch=128)


def _spec(directory: Path, env_id: str = "CartPole-v1", max_steps: int = 256, resume: bool = False) -> TrainSpec:
    return TrainSpec(env_id=env_id, target_reward=10_000, max_steps=max_steps, run=RUN, checkpoint_every=1,
                     checkpoint_dir=directory, resume=resume)


@pytest.fixture(scope="module")
def pristine(tmp_path_factory: pytest.TempPathFactory) -> Path:
    directory = tmp_path_factory.mktemp("checkpoint")
    train(_spec(directory), progress=False)
    assert any(p.is_file() for p in directory.iterdir())
    return directory


def _damage(path: Path, how: str, position: float, noise: bytes) -> None:
    data = path.read_bytes()
    at = int(position * max(len(data) - 1, 0))
    if how == "truncate":
        path.write_bytes(data[:at])
    elif how == "flip":
        path.write_bytes(data[:at] + bytes(b ^ 0xFF for b in data[at:at + 16]) + data[at + 16:])
    elif how == "replace":
        path.write_bytes(noise)
    elif how == "empty":
        path.write_bytes(b"")
    else:
        path.unlink()


def _resume(directory: Path, env_id: str = "CartPole-v1") -> None:
    try:
        result = train(_spec(directory, env_id=env_id, max_steps=512, resume=True), progress=False)
    except UserError as exc:
        assert "\n" not in str(exc).strip() and str(exc), f"not a one-line error: {exc!r}"
    else:
        assert result.env_steps >= 256  # resumed (the damage missed anything that matters)


@settings(max_examples=8, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(how=st.sampled_from(["truncate", "flip", "replace", "empty", "delete"]),
       position=st.floats(0.0, 1.0), noise=st.binary(max_size=64), which=st.integers(0, 10))
def test_a_damaged_checkpoint_resumes_or_is_refused_in_one_line(pristine: Path, tmp_path_factory: pytest.TempPathFactory,
                                                                 how: str, position: float, noise: bytes,
                                                                 which: int) -> None:
    directory = tmp_path_factory.mktemp("damaged")
    shutil.rmtree(directory)
    shutil.copytree(pristine, directory)
    files = sorted(p for p in directory.rglob("*") if p.is_file())
    _damage(files[which % len(files)], how, position, noise)
    _resume(directory)


def test_a_checkpoint_of_another_env_is_refused(pristine: Path, tmp_path: Path) -> None:
    directory = tmp_path / "other"
    shutil.copytree(pristine, directory)
    with pytest.raises(UserError, match="CartPole-v1"):
        train(_spec(directory, env_id="Acrobot-v1", max_steps=512, resume=True), progress=False)


def test_the_undamaged_checkpoint_resumes(pristine: Path, tmp_path: Path) -> None:
    """The property above is not vacuous: the same resume from an intact copy runs on."""
    directory = tmp_path / "intact"
    shutil.copytree(pristine, directory)
    result = train(_spec(directory, max_steps=512, resume=True), progress=False)
    assert result.env_steps >= 512
