"""The PPO update's wall-time speed-up at the thread counts the learner machines offer.

The pilot measures it once per profile (:func:`measure_thread_scaling`), on the learner's
real update (the workload's network, PPO settings and update engine) at the pilot's batch,
for one epoch: one throwaway learner per thread count, timed in turn, the order reversed on
every other repeat, and each thread count's speed-up the median over the repeats of one
thread's wall time over its own. Wall time, because threads run in parallel (their CPU
time adds up, their wall time is what the learner waits). A thread count is measured only
up to this host's CPUs: a machine with more vCPUs than that is counted at the most the
host measured (:class:`serverless.learner_machines.ThreadScaling`). On a busy host a
second thread waits for a core, so the speed-up reads low, never flattering: the label
records the host's load average.

Both update engines follow ``PPOConfig.torch_threads``: torch through
``torch.set_num_threads``, the numpy engine by holding its BLAS to that many threads
(``threadpoolctl``, :meth:`serverless.ppo.PPOLearner.learner_threads`).
"""

from __future__ import annotations

import os
import statistics
import time
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any

from serverless.learner_machines import LearnerTable, ThreadScaling, load_learner_table

if TYPE_CHECKING:
    import numpy as np

#: Timed repeats per thread count (after one warm-up update each): the median of three ratios.
REPEATS = 3


@dataclass(frozen=True)
class ThreadTiming:
    """What :func:`measure_thread_scaling` measured and what it cost the learner VM."""

    scaling: ThreadScaling
    vm_s: float  # the learner VM's seconds for it, on the run's clock
    batch: int


def host_cpus() -> int:
    """The CPUs this process may run on."""
    try:
        return len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        return os.cpu_count() or 1


def thread_counts(table: LearnerTable, cpus: int) -> tuple[int, ...]:
    """The thread counts above one that a candidate machine offers, each capped at ``cpus``."""
    return tuple(sorted({min(m.vcpus, cpus) for m in table.machines} - {1}))


def synthetic_batch(spec: Any, batch: int, rng: "np.random.Generator") -> "dict[str, np.ndarray]":
    """A PPO batch of ``batch`` random rows shaped for ``spec`` (the update's cost depends on
    its size, not on what the data says)."""
    import numpy as np

    if spec.action_kind == "discrete":
        actions = rng.integers(0, spec.act_dim, size=batch)
    else:
        actions = rng.normal(size=(batch, spec.act_dim)).astype(np.float32)
    return {
        "obs": rng.normal(size=(batch, spec.obs_dim)).astype(np.float32),
        "actions": actions,
        "logprobs": np.full(batch, -1.0, dtype=np.float32),
        "values": rng.normal(size=batch).astype(np.float32),
        "advantages": rng.normal(size=batch).astype(np.float32),
        "returns": rng.normal(size=batch).astype(np.float32),
    }


def measure_thread_scaling(
    workload: Any, batch: int, *, seed: int = 0, modelled: bool = True, repeats: int = REPEATS,
    counts: tuple[int, ...] | None = None,
) -> ThreadTiming:
    """The update's speed-up at ``counts`` threads (default: :func:`thread_counts` of the
    learner table on this host) against one, at ``batch``, one epoch (see the module's
    docstring). ``vm_s`` is the learner VM's time for the measurement: its wall time on a
    measured clock; on the modelled clock one thread's CPU time (host-speed corrected, as
    the trainer's) per update, divided by the speed-up for the updates at more threads."""
    import numpy as np
    import torch

    from serverless import host_speed
    from serverless.envs import inspect_env
    from serverless.ppo import PPOConfig, PPOLearner

    counts = thread_counts(load_learner_table(), host_cpus()) if counts is None else counts
    load = os.getloadavg()[0]
    if not counts:
        return ThreadTiming(ThreadScaling(label=f"one thread only: no candidate offers more on this {host_cpus()}-CPU host"), 0.0, batch)
    ppo = replace(PPOConfig.from_dict(dict(workload.ppo)), anneal_lr=False, epochs=1)
    spec = inspect_env(workload.env_id, hidden=ppo.hidden, env_kwargs=workload.env_kwargs)
    data = synthetic_batch(spec, batch, np.random.default_rng(seed))
    before = torch.get_num_threads()
    walls: dict[int, list[float]] = {k: [] for k in (1, *counts)}
    one_cpu: list[float] = []
    bracket = host_speed.Bracket("learner") if modelled else None
    try:
        learners = {k: PPOLearner(spec, replace(ppo, torch_threads=k), seed=seed) for k in walls}
        if bracket is not None:
            bracket.start()
        started = time.perf_counter()
        for r in range(repeats + 1):  # the first round warms each learner up, untimed
            for k in (list(walls) if r % 2 else list(walls)[::-1]):
                torch.set_num_threads(k)
                t0 = time.perf_counter()
                stats = learners[k].update(data)
                if r:
                    walls[k].append(time.perf_counter() - t0)
                if k == 1:
                    one_cpu.append(float(stats["learner_cpu_s"]))
        wall_s = time.perf_counter() - started
        factor = bracket.stop() if bracket is not None else 1.0
    finally:
        torch.set_num_threads(before)
    speedups = {k: statistics.median([a / b for a, b in zip(walls[1], walls[k])]) for k in counts}
    label = (f"measured, wall, host load {load:.2f} (1-min average, {host_cpus()} CPUs): one epoch at batch {batch}, "
             f"{learners[1].engine} engine, median of {repeats} interleaved ratios")
    scaling = ThreadScaling(((1, 1.0), *sorted(speedups.items())), label)
    if modelled:
        vm_s = sum(one_cpu) * factor * (1.0 + sum(1.0 / x for x in speedups.values()))
    else:
        vm_s = wall_s
    return ThreadTiming(scaling, vm_s, batch)
