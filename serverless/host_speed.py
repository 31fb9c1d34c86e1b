"""The host's momentary speed, so the local emulator's modelled clock does not inherit it.

The emulator models a function's duration, and the learner VM's time, from CPU time
measured on this host. On the development machine (a 2-vCPU VM) the same work takes up to
1.5x more CPU time in stretches of a few seconds than in others, with nothing else
running: no system time, no page faults, no preemption, just a slower vCPU (measured with
the probes in ``benchmarks/host_speed.py``). Each vCPU has its own state: one process
pinned to CPU 0 ran the learner metronome in 5.8 ms while CPU 1 ran it in 3.3 ms, and
minutes later both took 3.3 ms; presumably what shares the physical core on the host.
Different kinds of work slow by different amounts (one slow state cost the Python-loop
metronome 1.7x and the torch one 1.05x), hence one metronome per kind of work. Real Lambda does not slow down because our
host's neighbours got busy, and two runs that train the very same trajectory should not be
billed 1.5x apart, so the modelled clock is corrected for it.

Each piece of timed work is bracketed by a *metronome*: a fixed workload of the same kind
(numpy matrix-vector steps in a Python loop for a rollout, a small torch forward and
backward pass for the learner), timed right before and right after, outside the timed
work. The work's CPU time is scaled by ``factor = REFERENCE_MS / metronome_ms``:
``REFERENCE_MS`` is the metronome's median CPU time on the reference host (the machine
these constants were measured on), so on that host at its usual speed the factor is 1 and
the clock keeps its old scale, and on any host the modelled figures are in reference-host
seconds. The factor is recorded beside every figure it scaled, so the raw CPU time can
always be recovered (``raw = scaled / factor``).

Only the *modelled* clock is scaled. Measured backends (Ray wall time, Lambda's billed
duration) report what they measured.
"""

from __future__ import annotations

import os
import time
from typing import TYPE_CHECKING, Callable

import numpy as np

if TYPE_CHECKING:
    import torch

# CPU time of one metronome on the reference host (2-vCPU Intel Xeon VM, the project's
# development machine) in its fast, uncontended state: the smallest per-CPU median of 600
# ticks over three calibrations on 2026-12-01 (`python -m benchmarks.host_speed
# --calibrate`; the slow states read up to 1.7x more: rollout 2.58-2.65 ms in one of them).
REFERENCE_MS = {"rollout": 1.50, "learner": 3.25}

# A factor outside these bounds means the metronome itself misfired (e.g. the process
# was descheduled mid-tick on a host without CPU-time accounting); it is clamped.
MIN_FACTOR, MAX_FACTOR = 0.25, 4.0

ENV_DISABLE = "TRAINWISE_RAW_CPU_CLOCK"  # set to 1: the modelled clock uses raw CPU time


def enabled() -> bool:
    return os.environ.get(ENV_DISABLE, "") not in ("1", "true", "yes")


# --------------------------------------------------------------------- the metronomes
_ROLLOUT_STEPS = 400


def _rollout_arrays() -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    x = np.linspace(-1.0, 1.0, 8, dtype=np.float32)
    w1 = np.linspace(-0.3, 0.3, 8 * 64, dtype=np.float32).reshape(8, 64)
    w2 = np.linspace(-0.2, 0.2, 64 * 64, dtype=np.float32).reshape(64, 64)
    w3 = np.linspace(-0.1, 0.1, 64 * 2, dtype=np.float32).reshape(64, 2)
    return x, w1, w2, w3


_ROLLOUT = _rollout_arrays()


def rollout_metronome_ms() -> float:
    """CPU ms of a fixed rollout-like workload: a policy's forward pass per step, in Python."""
    x, w1, w2, w3 = _ROLLOUT
    c0 = time.thread_time()
    acc = 0.0
    for i in range(_ROLLOUT_STEPS):
        h = np.tanh(x @ w1)
        h = np.tanh(h @ w2)
        acc += float((h @ w3)[0]) + i * 0.5
    return (time.thread_time() - c0) * 1000.0


_LEARNER_REPS = 12
_learner_state: dict[str, torch.nn.Module | torch.Tensor] = {}  # the learner metronome's net and input, made once


def learner_metronome_ms() -> float:
    """CPU ms of a fixed learner-like workload: forward and backward of a small torch MLP.

    Always on one torch thread: ``thread_time`` counts only the calling thread, so with
    torch's intra-op pool the same work would read as less CPU time (the learner itself
    runs on one thread, ``PPOConfig.torch_threads``).
    """
    import torch

    if not _learner_state:
        gen = torch.Generator().manual_seed(0)
        net = torch.nn.Sequential(
            torch.nn.Linear(8, 64), torch.nn.Tanh(), torch.nn.Linear(64, 64), torch.nn.Tanh(), torch.nn.Linear(64, 1)
        )
        _learner_state.update(net=net, x=torch.randn(256, 8, generator=gen))
    net, x = _learner_state["net"], _learner_state["x"]
    threads = torch.get_num_threads()
    if threads != 1:
        torch.set_num_threads(1)
    try:
        c0 = time.thread_time()
        for _ in range(_LEARNER_REPS):
            net.zero_grad(set_to_none=True)
            net(x).pow(2).mean().backward()
        return (time.thread_time() - c0) * 1000.0
    finally:
        if threads != 1:
            torch.set_num_threads(threads)


METRONOMES: dict[str, Callable[[], float]] = {"rollout": rollout_metronome_ms, "learner": learner_metronome_ms}


def factor_from(kind: str, metronome_ms: float) -> float:
    """``REFERENCE_MS[kind] / metronome_ms``, clamped to [MIN_FACTOR, MAX_FACTOR]."""
    if metronome_ms <= 0:
        return 1.0
    return min(MAX_FACTOR, max(MIN_FACTOR, REFERENCE_MS[kind] / metronome_ms))


class Bracket:
    """Times the metronome of ``kind`` before and after a piece of work.

    >>> b = Bracket("rollout"); b.start(); ...work...; b.stop(); b.factor

    With the correction disabled (``TRAINWISE_RAW_CPU_CLOCK=1``) no metronome runs and the
    factor is 1.
    """

    def __init__(self, kind: str) -> None:
        if kind not in METRONOMES:
            raise ValueError(f"unknown metronome {kind!r}; known: {sorted(METRONOMES)}")
        self.kind = kind
        self.active = enabled()
        self._before = 0.0
        self.metronome_ms = 0.0
        self.factor = 1.0

    def start(self) -> None:
        if self.active:
            self._before = METRONOMES[self.kind]()

    def stop(self) -> float:
        if self.active:
            self.metronome_ms = (self._before + METRONOMES[self.kind]()) / 2.0
            self.factor = factor_from(self.kind, self.metronome_ms)
        return self.factor
