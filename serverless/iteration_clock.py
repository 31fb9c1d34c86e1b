"""The iteration clock: how long one training iteration takes on the Lambda clock.

``wall_s`` is measured on this machine. The Lambda clock of an iteration is the rollout
batch's ``lambda_s`` (modelled by the local emulator, measured on Ray and AWS) plus the
learner host's part (:func:`learner_host_s`). On the modelled clock, CPU times are
corrected for the host's momentary speed (``serverless.host_speed``: a metronome around
the timed work). The controller's work between iterations is timed the same way
(:meth:`IterationClock.time_controller`).
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any, Callable

from serverless import host_speed


def learner_host_s(*, modelled: bool, host_cpu_s: float, host_wall_s: float) -> float:
    """The learner host's part of one iteration on the Lambda clock.

    The host builds the events, waits for the functions, then assembles the batch and
    updates the policy. On the modelled clock (local emulator) its part is the trainer
    thread's CPU time outside the invoke call: the learner runs on one torch thread, so
    on an otherwise idle host CPU time is its wall time, and unlike wall time it does
    not grow when other jobs share this machine. The emulated functions' part is CPU
    time as well (``lambda_clock``), so the whole modelled clock is load-independent.
    The caller passes CPU time already corrected for the host's speed (``host_speed``).
    On a measured backend (Lambda, Ray) the host's part is its measured wall time.
    """
    return max(0.0, host_cpu_s if modelled else host_wall_s)


@dataclass(frozen=True)
class IterationTimes:
    wall_s: float  # measured, the whole iteration
    host_s: float  # the learner host's part on the Lambda clock
    host_speed: float  # the speed factor applied (1.0 off the modelled clock)
    lambda_s: float  # rollouts + host, on the Lambda clock
    modelled: bool


class IterationClock:
    """Times one iteration: start, the rollout call (excluded from the host's CPU), stop."""

    def __init__(self, modelled_hint: bool) -> None:
        self._speed = host_speed.Bracket("learner") if modelled_hint else None
        if self._speed is not None:
            self._speed.start()  # the learner host's speed right now, outside the timed work
        self._t0 = time.perf_counter()
        self._c0 = time.thread_time()
        self._c_rollouts = 0.0
        self._factor = 1.0
        self._modelled = modelled_hint

    def rollouts(self, collect: Callable[[], Any]) -> Any:
        """Run the rollout collection; its thread CPU time is the functions', not the host's."""
        c = time.thread_time()
        try:
            return collect()
        finally:
            self._c_rollouts += time.thread_time() - c

    def stop(self, *, rollout_lambda_s: float, rollout_wall_s: float, modelled: bool) -> IterationTimes:
        wall = time.perf_counter() - self._t0
        host_cpu = time.thread_time() - self._c0 - self._c_rollouts
        self._modelled = modelled
        self._factor = self._speed.stop() if self._speed is not None and modelled else 1.0
        host = learner_host_s(modelled=modelled, host_cpu_s=host_cpu * self._factor, host_wall_s=wall - rollout_wall_s)
        return IterationTimes(wall, host, self._factor, rollout_lambda_s + host, modelled)

    def time_controller(self, work: Callable[[], Any]) -> tuple[Any, float]:
        """Run the controller's work; its time on the Lambda clock, measured like the host's."""
        c, t = time.thread_time(), time.perf_counter()
        out = work()
        seconds = learner_host_s(
            modelled=self._modelled,
            host_cpu_s=(time.thread_time() - c) * self._factor,
            host_wall_s=time.perf_counter() - t,
        )
        return out, seconds
