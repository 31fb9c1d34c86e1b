"""Chaos: kill -9 the training process five times in one run, each life after a seeded
number of checkpointed iterations, and resume each time; the run reaches its target and
its result file is whole."""

from __future__ import annotations

import json
import os
import random
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from serverless.checkpoint import CHECKPOINT_FILE, read_checkpoint

KILLS = 5
CHAOS_SEED = 33  # each life runs 1-4 checkpointed iterations past where it resumed, then is killed


def _checkpointed_iteration(directory: Path) -> int | None:
    """The iteration of the checkpoint in ``directory`` (None before the first one)."""
    if not (directory / CHECKPOINT_FILE).exists():
        return None
    meta, _ = read_checkpoint(directory)  # replaced atomically: always whole
    return int(meta["run_state"]["iteration"])


def _wait_for_iteration(directory: Path, iteration: int, proc: subprocess.Popen, timeout_s: float = 120.0) -> None:
    """Until this process has checkpointed ``iteration`` or a later one (or it has ended)."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline and proc.poll() is None:
        done = _checkpointed_iteration(directory)
        if done is not None and done >= iteration:
            return
        time.sleep(0.05)
    if proc.poll() is None:
        raise AssertionError(f"iteration {iteration} not checkpointed within {timeout_s} s")


@pytest.mark.slow
def test_kill_nine_five_times_then_resume_reaches_the_target(tmp_path: Path) -> None:
    rng = random.Random(CHAOS_SEED)
    ck, out = tmp_path / "ck", tmp_path / "result.json"
    cmd = [
        sys.executable, "-m", "trainwise", "rl", "train", "--env", "CartPole-v1", "--target-reward", "475",
        "--max-steps", "100000", "--seed", "1", "--no-progress", "--checkpoint-every", "1",
        "--checkpoint-dir", str(ck), "--json-out", str(out),
    ]
    env = dict(os.environ, TRAINWISE_HOME=str(tmp_path / "home"))
    iterations: list[int] = []
    for k in range(KILLS):
        resumed_at = _checkpointed_iteration(ck)
        kill_after = (-1 if resumed_at is None else resumed_at) + rng.randint(1, 4)
        proc = subprocess.Popen(cmd + (["--resume"] if k else []), env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        _wait_for_iteration(ck, kill_after, proc)
        proc.send_signal(signal.SIGKILL)
        _, err = proc.communicate(timeout=60)
        assert proc.returncode == -signal.SIGKILL, f"life {k} ended by itself: {err.decode()[-2000:]}"
        assert not out.exists()  # no result from a killed run
        meta, _ = read_checkpoint(ck)  # whole, whatever the moment of the kill
        iterations.append(int(meta["run_state"]["iteration"]))
    assert iterations == sorted(iterations) and len(set(iterations)) == KILLS, iterations  # each life moved on
    final = subprocess.run(cmd + ["--resume"], env=env, capture_output=True, text=True, timeout=600)
    assert final.returncode == 0, final.stderr[-2000:]
    result = json.loads(out.read_text())
    assert result["reached"] is True and result["final_mean_return"] >= 475
    assert [c["iteration"] for c in result["curve"]] == list(range(len(result["curve"])))
    assert result["curve"][-1]["env_steps"] == result["env_steps"]
    assert result["lost_rollouts"] == 0 and result["duplicate_rollouts"] == 0
    assert any(f"at iteration {iterations[-1]}," in note for note in result["notes"])
    assert result["ledger"]["lines"][1]["quantity"] >= len(result["curve"]) * 4  # every iteration's requests, all lives
