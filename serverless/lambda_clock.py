"""The modelled Lambda clock: how long a batch of invocations would take on AWS Lambda.

Synchronous PPO learns the same whatever number of functions produce a batch, so
the local emulator can run 64 actors on 2 cores and still say what the batch would
take on Lambda, where each function has its own instance. The model, per invocation:

    duration  = cpu_ms / min(cpu_share, 1)          # the handler is single-threaded
    busy time = invoke_overhead_ms
              + (cold_start_ms + init_ms  if cold)  # sandbox start + imports
              + duration

``cpu_ms`` is the handler's CPU time measured on this machine (CPU time, not wall
time, so contention between emulated functions on few cores does not leak in), and
``cpu_share`` = memory_mb / 1769 (one vCPU at 1,769 MB). Invocations are started
in order on ``concurrency`` slots, each taking the first slot to free up, as a client
with a pool of ``concurrency`` synchronous calls does; the batch time is the
makespan. With concurrency >= the number of invocations it is the slowest one.

Everything here is a pure function of its inputs, so it is tested on hand-made
durations. Assumptions (defaults, overridable): invoke overhead 20 ms per
synchronous Invoke round trip, sandbox start 150 ms per cold start (AWS publishes
neither; both are typical of published measurements for the Python runtime), init
not scaled by the CPU share, and the learner's host sees the machine's CPU speed.
"""

from __future__ import annotations

import heapq
from dataclasses import dataclass

from serverless.invocation import LAMBDA_MB_PER_VCPU

DEFAULT_INVOKE_OVERHEAD_MS = 20.0
DEFAULT_COLD_START_MS = 150.0


def cpu_share(memory_mb: int) -> float:
    """vCPUs a Lambda function gets at ``memory_mb`` (1.0 at 1,769 MB)."""
    return memory_mb / LAMBDA_MB_PER_VCPU


@dataclass(frozen=True)
class ModelledInvocation:
    cpu_ms: float
    cpu_share: float
    cold: bool = False
    init_ms: float = 0.0


def modelled_duration_ms(inv: ModelledInvocation) -> float:
    """The handler's duration on Lambda: its CPU work at its (at most one) vCPU share."""
    if inv.cpu_share <= 0:
        raise ValueError(f"cpu_share must be > 0, got {inv.cpu_share}")
    return inv.cpu_ms / min(inv.cpu_share, 1.0)


@dataclass(frozen=True)
class ModelledBatch:
    batch_s: float
    durations_ms: list[float]  # the modelled (billable) handler durations
    busy_ms: list[float]  # per invocation, including overhead and cold start
    label: str = "modelled"


def model_batch(
    invocations: list[ModelledInvocation],
    concurrency: int,
    invoke_overhead_ms: float = DEFAULT_INVOKE_OVERHEAD_MS,
    cold_start_ms: float = DEFAULT_COLD_START_MS,
) -> ModelledBatch:
    """Modelled wall time of the batch on Lambda at ``concurrency`` (see module docstring)."""
    if concurrency < 1:
        raise ValueError(f"concurrency must be >= 1, got {concurrency}")
    durations = [modelled_duration_ms(inv) for inv in invocations]
    busy = [
        invoke_overhead_ms + (cold_start_ms + inv.init_ms if inv.cold else 0.0) + d
        for inv, d in zip(invocations, durations)
    ]
    slots = [0.0] * min(concurrency, max(len(busy), 1))
    heapq.heapify(slots)
    makespan = 0.0
    for b in busy:
        start = heapq.heappop(slots)
        end = start + b
        makespan = max(makespan, end)
        heapq.heappush(slots, end)
    return ModelledBatch(batch_s=makespan / 1000.0, durations_ms=durations, busy_ms=busy)
