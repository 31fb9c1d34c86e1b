"""Running the optimize flow's two branches, one after the other or at once.

Running Seraph and InTune concurrently only helps when the machine has cores to
spare: each branch keeps about two cores busy (PPO's learner and actor functions;
tf.data's parallel stages), and InTune *measures* throughput, so sharing two cores
with a training run would corrupt its figures. ``concurrency: auto`` therefore runs
the branches in parallel on 4 or more cores and one after the other below that.

This decides the layout of one flow run. The measurements themselves are guarded by the
node's measurement limit (:mod:`tasks.measure`), across flow runs and between the two
branches alike, so branches running at once still never measure at the same time.
"""

from __future__ import annotations

import os
from typing import Literal

MIN_CORES_FOR_PARALLEL = 4


def usable_cores() -> int:
    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)


def branches_in_parallel(mode: Literal["auto", "parallel", "sequential"], n_branches: int) -> tuple[bool, str]:
    """Whether to run the branches at once, and why (for the log and the report)."""
    cores = usable_cores()
    if n_branches < 2:
        return False, "one branch only"
    if mode == "parallel":
        return True, "concurrency: parallel requested"
    if mode == "sequential":
        return False, "concurrency: sequential requested"
    if cores >= MIN_CORES_FOR_PARALLEL:
        return True, f"{cores} cores: the branches run at once"
    return False, (
        f"{cores} cores (< {MIN_CORES_FOR_PARALLEL}): the branches run one after the other, so InTune's "
        "throughput measurements do not share cores with RL training"
    )
