"""The function-backend interface shared by the local emulator, Ray and AWS Lambda.

A backend invokes a batch of rollout events at one memory size and returns, per
invocation, the handler's result and a billing record. The trainer and the tuner
only ever see this interface, so the backends are interchangeable.

Labels matter: a figure a backend *measured* on this machine, one it *modelled*
(the local emulator's Lambda clock and price-table costs) and one AWS *billed*
(parsed from Lambda's REPORT line) are never mixed silently. Every record and
batch carries its label.
"""

from __future__ import annotations

import math

from dataclasses import dataclass, field
from typing import Literal, Protocol, runtime_checkable

from core.errors import UserError
from serverless.rollout_event import RolloutEvent, RolloutReply

# Public AWS Lambda limits (docs/aws.md lists the sources).
LAMBDA_MIN_MEMORY_MB = 128
LAMBDA_MAX_MEMORY_MB = 10_240
LAMBDA_MB_PER_VCPU = 1_769
LAMBDA_MAX_TIMEOUT_S = 900
LAMBDA_SYNC_PAYLOAD_LIMIT_BYTES = 6 * 1024 * 1024

FigureLabel = Literal["measured", "modelled", "billed"]


@dataclass(frozen=True)
class BillingRecord:
    """What one invocation costs, in Lambda's own units.

    ``billed_ms`` is the duration rounded up to 1 ms (Lambda's granularity);
    ``init_ms`` is the cold-start (init) time, zero for a warm start; ``label`` says where
    the figures came from. Lambda bills the INIT phase of on-demand functions as well
    (AWS standardized INIT billing for managed runtimes from August 2025), so what a run is
    charged is :attr:`charged_ms`.
    """

    billed_ms: int
    duration_ms: float
    init_ms: float
    memory_mb: int
    error: str | None = None
    cold_start: bool = False
    max_memory_used_mb: int | None = None
    label: FigureLabel = "modelled"

    @property
    def charged_ms(self) -> int:
        """The milliseconds charged: the duration plus INIT. A real bill (``billed``: a REPORT
        line's Billed Duration) already includes INIT; a modelled or measured record adds it."""
        return self.billed_ms if self.label == "billed" else self.billed_ms + math.ceil(self.init_ms)


@dataclass
class Invocation:
    """One function call: the handler's decoded result (None on error) and its bill."""

    result: RolloutReply | None
    billing: BillingRecord


@dataclass
class InvokeBatch:
    """The outcome of one batch of invocations.

    ``wall_s`` is the measured wall-clock time of the whole batch on this machine.
    ``lambda_s`` is the time the batch takes on Lambda at the requested concurrency:
    modelled by the local emulator, measured wall time on AWS Lambda and Ray.
    """

    invocations: list[Invocation]
    wall_s: float
    lambda_s: float
    lambda_s_label: FigureLabel
    concurrency: int
    notes: list[str] = field(default_factory=list)


@runtime_checkable
class FunctionBackend(Protocol):
    """Invoke rollout functions. Implementations: local, ray, lambda."""

    name: str

    def invoke(self, events: list[RolloutEvent], memory_mb: int, concurrency: int | None = None) -> InvokeBatch:
        """Run ``handler(event, context)`` once per event at ``memory_mb``.

        ``concurrency`` bounds how many run at once (default: all of them). Errors
        are reported per invocation in ``BillingRecord.error``, not raised, so the
        caller can retry or re-plan without losing the samples already gathered.
        """
        ...

    def close(self) -> None:
        """Release workers, pools and connections."""
        ...


def check_memory_mb(memory_mb: int) -> None:
    """Lambda's memory range: 128 to 10,240 MB in 1 MB steps."""
    if isinstance(memory_mb, bool) or not isinstance(memory_mb, int):
        raise UserError(f"memory must be a whole number of MB, got {memory_mb!r}")
    if not LAMBDA_MIN_MEMORY_MB <= memory_mb <= LAMBDA_MAX_MEMORY_MB:
        raise UserError(
            f"memory {memory_mb} MB is outside Lambda's range: allowed {LAMBDA_MIN_MEMORY_MB}-{LAMBDA_MAX_MEMORY_MB} MB"
        )
