"""A writer to kill: ``python -m tests.core.crash_writer KIND PATH`` writes generation 1 of a
file of KIND (agent, profile, checkpoint, history) at PATH, then starts generation 2 and stops
inside the atomic writer, after the new bytes are written and before they are renamed into
place: it prints ``mid-write`` and sleeps until it is killed (at most 60 s, then exits 3).

``HALF=1`` stops earlier, half-way through the bytes of generation 2."""

from __future__ import annotations

import os
import sys
import time
from pathlib import Path
from typing import Any, Callable

from core import atomic


def _hang(*_: Any) -> None:
    print("mid-write", flush=True)
    time.sleep(60)
    sys.exit(3)


def _stop_mid_write() -> None:
    """From now on the atomic writer stops at its fsync (the bytes written, not yet renamed),
    or with HALF=1 half-way through writing them."""
    if os.environ.get("HALF") == "1":
        real = atomic.write_file

        def half(path: Any, fill: Callable[[Path], object]) -> Path:
            def fill_half(tmp: Path) -> None:
                fill(tmp)
                data = tmp.read_bytes()
                tmp.write_bytes(data[: len(data) // 2])
                _hang()

            return real(path, fill_half)

        atomic.write_file = half  # type: ignore[assignment]
    else:
        atomic.os.fsync = _hang  # type: ignore[assignment]


def agent(path: Path, gen: int) -> None:
    from optimizers.intune.agent import MaskedDQN

    MaskedDQN(seed=gen, info={"generation": gen}).save(path)


def profile(path: Path, gen: int) -> None:
    """A Seraph profile (PATH is the profiles folder), its pilot's iteration count the generation."""
    from dataclasses import replace

    from optimizers.seraph.pilot import workload_for
    from optimizers.seraph.workload_profile import save_profile
    from tests.optimizers.seraph.test_steps import _synthetic_profile

    prof = _synthetic_profile(workload_for("CartPole-v1", None))
    save_profile(replace(prof, pilot=replace(prof.pilot, iterations=gen)), root=path)


def checkpoint(path: Path, gen: int) -> None:
    import torch

    from serverless.checkpoint import save_checkpoint

    save_checkpoint(path, identity={"env_id": "CartPole-v1", "seed": 0}, policy_spec={"obs": 4},
                    learner_state={"w": torch.full((256, 256), float(gen))}, run_state={"iteration": gen})


def history(path: Path, gen: int) -> None:
    """A run's history record (PATH is the history folder), its seed the generation."""
    from optimizers.seraph.history import History, JobKey, Phase, RunRecord
    from serverless.run_shape import RunShape

    h = History(JobKey.of("CartPole-v1", {}, 150.0, {"gamma": 0.99}, 300_000), root=path)
    h.record(RunRecord(key=h.key, seed=gen, arm="seraph", objective="cost", source="crash test",
                       phases=(Phase(RunShape(2, 1769, 4000, 2000)),), reached=True, env_steps=1000, lambda_time_s=1.0,
                       cost_usd=1e-4, wall_s=1.0, cost_label="modelled"))


def main() -> None:
    kind, path = sys.argv[1], Path(sys.argv[2])
    write = {"agent": agent, "profile": profile, "checkpoint": checkpoint, "history": history}[kind]
    write(path, 1)
    _stop_mid_write()
    write(path, 2)
    sys.exit(4)  # not reached: the writer hangs mid-write


if __name__ == "__main__":
    main()
