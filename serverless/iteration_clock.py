"""The iteration clock: how long one training iteration takes on the Lambda clock.

``wall_s`` is measured on this machine. The Lambda clock of an iteration is the rollout
batch's ``lambda_s`` (modelled by the local emulator, measured on Ray and AWS) plus the
learner host's part (:func:`learner_host_s`). On the modelled clock, CPU times are
corrected for the host's momentary speed (``serverless.host_speed``: a metronome around
the timed work). The controller's work between iterations is timed the same way
(:meth:`IterationClock.time_controller`).

The clock also times the iteration's phases (:meth:`IterationClock.phase`) and splits its
wall time into them (:class:`PhaseBreakdown`, :meth:`IterationClock.breakdown`).
"""

from __future__ import annotations

import time
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any, Callable, Iterator, TypedDict

from serverless import host_speed
from serverless.rollout_event import RolloutReply


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
        self._wall = 0.0
        self.phase_s: dict[str, float] = {}  # measured wall seconds by phase name

    @contextmanager
    def phase(self, name: str) -> Iterator[None]:
        """Time a phase of the iteration (wall seconds, added up under ``name``)."""
        t = time.perf_counter()
        try:
            yield
        finally:
            self.phase_s[name] = self.phase_s.get(name, 0.0) + time.perf_counter() - t

    def rollouts(self, collect: Callable[[], Any]) -> Any:
        """Run the rollout collection; its thread CPU time is the functions', not the host's."""
        c = time.thread_time()
        try:
            with self.phase("rollouts"):
                return collect()
        finally:
            self._c_rollouts += time.thread_time() - c

    def stop(self, *, rollout_lambda_s: float, rollout_wall_s: float, modelled: bool) -> IterationTimes:
        wall = self._wall = time.perf_counter() - self._t0
        host_cpu = time.thread_time() - self._c0 - self._c_rollouts
        self._modelled = modelled
        self._factor = self._speed.stop() if self._speed is not None and modelled else 1.0
        host = learner_host_s(modelled=modelled, host_cpu_s=host_cpu * self._factor, host_wall_s=wall - rollout_wall_s)
        return IterationTimes(wall, host, self._factor, rollout_lambda_s + host, modelled)

    def breakdown(self, results: list[RolloutReply]) -> "PhaseBreakdown":
        """The stopped iteration's wall time by phase; ``results`` are the rollouts used."""
        timed = dict(self.phase_s)
        seconds = {name: timed.get(name.removesuffix("_s"), 0.0) for name in PHASES}
        seconds.update(split_rollouts(timed.get("rollouts", 0.0), results))
        return PhaseBreakdown(self._wall, tuple((name, seconds[name]) for name in PHASES))

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


# ------------------------------------------------------------------------ the breakdown
# The phases of one iteration, in the order they run. ``other_s`` is the remainder.
PHASES = (
    "encode_s",  # export the policy, encode its weights, build the events
    "dispatch_s",  # the rollout call's wall time outside the functions' critical path
    "function_env_s",  # on the critical path: inside the env (step, reset)
    "function_policy_s",  # on the critical path: the rollout's policy inference and bookkeeping
    "function_other_s",  # on the critical path: the rest of the handler (weights, init, result encoding)
    "decode_s",  # decode the trajectories
    "gae_s",  # GAE and the batch's concatenation
    "update_s",  # the PPO update
    "checkpoint_s",  # the checkpoint written after the iteration, if any
)


class PhaseReport(TypedDict):
    """An iteration's wall time by phase, as the trainer's result lists it (measured)."""

    iteration_s: float
    phases_s: dict[str, float]
    shares: dict[str, float]
    label: str


@dataclass(frozen=True)
class PhaseBreakdown:
    """Where one iteration's measured wall time went (seconds, on this machine).

    The trainer thread runs the phases one after another, so they add up to
    ``iteration_s`` (the iteration's ``wall_s`` plus its checkpoint); ``other_s`` is what
    no phase timed (episode bookkeeping, the record, the online layout probe when the controller asks for one). The rollout call is split along its
    critical path: the lane (worker, actor or function instance) whose handlers ran
    longest, by their own timings; the rest of the call is dispatch (events and results
    through pipes or the network, waiting for a lane, the emulator's metronome)."""

    iteration_s: float
    seconds: tuple[tuple[str, float], ...]  # (phase, s) for every name in PHASES

    @property
    def other_s(self) -> float:
        return self.iteration_s - sum(s for _, s in self.seconds)

    def with_checkpoint(self, seconds: float) -> "PhaseBreakdown":
        """The same iteration followed by a checkpoint of ``seconds``."""
        return PhaseBreakdown(
            self.iteration_s + seconds,
            tuple((name, s + seconds if name == "checkpoint_s" else s) for name, s in self.seconds),
        )

    def to_dict(self) -> PhaseReport:
        phases = {**dict(self.seconds), "other_s": self.other_s}
        total = self.iteration_s
        return {
            "iteration_s": total,
            "phases_s": phases,
            "shares": {name: (s / total if total > 0 else 0.0) for name, s in phases.items()},
            "label": "measured",
        }


def critical_lane(results: list[RolloutReply]) -> dict[str, float]:
    """The handler timings (ms) summed over the lane whose handlers ran longest.

    A result's ``lane`` (set by the local and Ray backends: the worker or actor that ran
    it) groups the results that ran one after another; a result without one (Lambda) is
    its own lane."""
    lanes: dict[Any, dict[str, float]] = {}
    for index, result in enumerate(results):
        t = result.get("timings") or {}
        lane = lanes.setdefault(result.get("lane", ("own", index)), {"total_ms": 0.0, "rollout_ms": 0.0, "env_ms": 0.0})
        for key in lane:
            lane[key] += float(t.get(key, 0.0))
    return max(lanes.values(), key=lambda lane: lane["total_ms"], default={"total_ms": 0.0, "rollout_ms": 0.0, "env_ms": 0.0})


def split_rollouts(rollouts_s: float, results: list[RolloutReply]) -> dict[str, float]:
    """The rollout call's wall time as dispatch plus the critical lane's env, policy and
    other handler time (scaled down together if the handlers' clocks read more than the call)."""
    lane = critical_lane(results)
    total = lane["total_ms"] / 1000.0
    scale = min(1.0, rollouts_s / total) if total > 0 else 0.0
    env = lane["env_ms"] / 1000.0 * scale
    policy = max(0.0, lane["rollout_ms"] - lane["env_ms"]) / 1000.0 * scale
    other = max(0.0, total * scale - env - policy)
    return {
        "dispatch_s": rollouts_s - (env + policy + other),
        "function_env_s": env,
        "function_policy_s": policy,
        "function_other_s": other,
    }
