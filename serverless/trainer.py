"""The actor-learner loop: serverless rollouts, a PPO learner, a cost ledger.

Each iteration:

1. export the policy to numpy arrays, encode them once as ``.npz`` (base64);
2. invoke ``actors`` rollout functions through the backend, each for
   ``batch / actors`` env steps (the remainder spread over the first actors); with
   ``PPOConfig.steps_per_env`` set, the batch is split into env slots first and the
   functions share the slots out (:func:`serverless.slots.slot_plan`);
3. compute GAE per segment and run one PPO update;
4. account the cost (function GB-s, requests, learner VM time), record the
   iteration, ask the controller (if any) for a new :class:`RunShape`,
   checkpoint every ``checkpoint_every`` iterations (and once before the first).

The pieces live in their own modules: rollout events and batch assembly
(:mod:`serverless.rollout_batch`), fault-tolerant collection with retries, hedging and
rollout ids (:mod:`serverless.rollouts`), the iteration clock
(:mod:`serverless.iteration_clock`), the run's state (:mod:`serverless.run_state`) and
crash-safe checkpoints (:mod:`serverless.checkpoint`). This module holds the run's
inputs and outputs and the loop that composes them.

**Reached** means: the mean return of the last ``reach_window`` (default 20)
*completed training episodes* (the stochastic policy, as it trains) is at least
``target_reward``. The run stops as soon as that holds, or when ``max_steps`` env
steps have been used (checked after each iteration, so a run may overshoot
``max_steps`` by less than one batch only if the batch does not divide it; we
shrink the last batch so it never does).

**Clocks.** ``wall_s`` is measured on this machine. ``lambda_time_s`` is the run's
time on Lambda: per iteration the rollouts' ``lambda_s`` (modelled by the local
emulator, measured on Ray and AWS; retries and hedges included) plus the learner host's
time (its CPU time on the modelled clock, its wall time otherwise:
:func:`serverless.iteration_clock.learner_host_s`); the learner VM is
priced for that time. Each ``IterationRecord`` carries its own ``iteration_lambda_s``.
On the modelled clock, CPU times are corrected for the host's momentary speed
(``serverless.host_speed``: a metronome around the timed work); ``host_speed`` in each
record is the learner's factor, and each invocation's ``emulator`` block the function's.
The controller's work between iterations (a tuner observing the record and re-planning)
runs on the learner host too and the next iteration waits for it: its time, measured the
same way (CPU time at the iteration's speed factor on the modelled clock, wall time
otherwise), is added to ``lambda_time_s`` and priced as learner-VM time, but kept out of
the iteration records (``controller_s`` totals it), which hold the iterations alone.

**Faults.** ``TrainSpec.faults`` wraps the backend in
:class:`serverless.backends.faults.FaultInjectingBackend`. Whatever the source of a
fault, the rollout collector retries failed, throttled and timed-out attempts
(``TrainSpec.retry``), and behind the injector also hedges stragglers, until every slot
has exactly one result; the result reports ``faults``, ``lost_rollouts`` and
``duplicate_rollouts``, and the ledger the faults' cost. If a slot's faults do not clear
within the retry bound, the run stops with ``stop_reason`` "faults: ..." and checkpoints.
"""

from __future__ import annotations

import math
import sys
import time
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Any, Protocol, TypedDict, runtime_checkable

from core.errors import UserError
from core.json_edge import JsonObject
from serverless.backends import BACKENDS
from serverless.backends.faults import FaultInjectingBackend, FaultSpec
from serverless.checkpoint import RunIdentity, load_checkpoint, save_checkpoint
from serverless.iteration_clock import IterationClock, PhaseBreakdown
from serverless.layout_probe import LayoutProbe
from serverless.learner_machines import LearnerMachine
from serverless.ledger import BILLED, MODELLED, CostLedger
from serverless.policy import PolicySpec
from serverless.ppo import GradNoiseProbe, PPOConfig, PPOLearner, UpdateStats
from serverless.pricing import ARCHITECTURES, PriceTable
from serverless.rollout_batch import (
    RolloutSummary, assemble_batch, batch_from_segments, decode_segments, decode_trajectories, rollout_events,
    rollout_summary,
)
from serverless.rollouts import Collected, RolloutRetryPolicy, RolloutCollector, RolloutsFailed
from serverless.run_shape import RunShape, RunShapeError
from serverless.rollout_event import RolloutReply
from serverless.run_state import ConfigChange, CurvePoint, RunState
from serverless.slots import slot_plan

__all__ = [
    "Controller",
    "IterationRecord",
    "RolloutRetryPolicy",
    "TrainResult",
    "TrainSpec",
    "assemble_batch",
    "decode_trajectories",
    "rollout_events",
    "slot_plan",
    "train",
]


@dataclass
class TrainSpec:
    """What to train, to which reward, on what, and how to checkpoint, resume and fail."""

    env_id: str
    target_reward: float
    max_steps: int = 100_000
    run: RunShape = field(default_factory=RunShape)
    ppo: PPOConfig = field(default_factory=PPOConfig)
    seed: int = 0
    backend: str = "local"
    backend_options: JsonObject = field(default_factory=dict)
    architecture: str = "x86_64"
    checkpoint_every: int = 10  # iterations; 0 = never
    checkpoint_dir: Path | None = None  # default a new .trainwise/checkpoints/<env>-seed<S>/<run> (resume: the newest of this run)
    resume: bool = False
    reach_window: int = 20
    price_table: Path | None = None
    # when resuming from a checkpoint, continue at this run shape instead of the checkpoint's
    resume_run: RunShape | None = None
    faults: FaultSpec | None = None  # inject faults into the backend's invocations
    retry: RolloutRetryPolicy = field(default_factory=RolloutRetryPolicy)
    env_kwargs: JsonObject = field(default_factory=dict)  # gymnasium.make(env_id, **env_kwargs)
    # the learner's machine (serverless.learner_machines); None: the price table's learner VM
    learner: LearnerMachine | None = None

    def validate(self) -> None:
        """Every check that can fail, before any work starts."""
        from serverless.envs import parse_env_kwargs

        parse_env_kwargs(self.env_kwargs)
        if not isinstance(self.target_reward, (int, float)) or not math.isfinite(self.target_reward):
            raise UserError(f"target reward must be a finite number, got {self.target_reward!r}")
        if isinstance(self.max_steps, bool) or not isinstance(self.max_steps, int) or self.max_steps < 1:
            raise UserError(f"max steps must be a whole number >= 1, got {self.max_steps!r}")
        for name, run in (("run", self.run), ("resume_run", self.resume_run)):
            if run is not None and not isinstance(run, RunShape):  # a RunShape checked itself when made
                raise UserError(f"{name} must be a RunShape (serverless.run_shape), got {run!r}")
        if self.faults is not None and not isinstance(self.faults, FaultSpec):
            raise UserError(f"faults must be a FaultSpec (FaultSpec.parse('errors=0.1,...')), got {self.faults!r}")
        self.retry.validate()
        self.ppo.validate()
        if self.architecture not in ARCHITECTURES:
            raise UserError(f"architecture {self.architecture!r} is not allowed; allowed: {', '.join(ARCHITECTURES)}")
        BACKENDS.get(self.backend)  # an unknown name: a UserError listing the registered backends
        if self.checkpoint_every < 0:
            raise UserError(f"checkpoint every must be >= 0 iterations, got {self.checkpoint_every}")
        if self.reach_window < 1:
            raise UserError(f"reach window must be >= 1 episode, got {self.reach_window}")

    def identity(self) -> RunIdentity:
        """What makes a checkpoint this run's: a resume checks it field by field. The budget
        (``max_steps``) may grow on a resume, and the backend may change."""
        return {"env_id": self.env_id, "env_kwargs": dict(self.env_kwargs), "seed": self.seed,
                "run": self.run.to_dict(), "ppo": self.ppo.to_dict()}

    def resolved_checkpoint_dir(self) -> Path:
        """The folder given, or this run's own under ``checkpoints/<env>-seed<S>/``: a new one,
        or on a resume the newest whose checkpoint has this run's identity."""
        if self.checkpoint_dir is not None:
            return Path(self.checkpoint_dir)
        from core.paths import cache_dir, unique_dir
        from serverless.checkpoint import find_run_dir, runs_root

        parent = runs_root(cache_dir("checkpoints"), self.env_id, self.seed)
        return find_run_dir(parent, self.identity()) if self.resume else unique_dir(parent)

    def to_dict(self) -> JsonObject:
        return {
            "env_id": self.env_id,
            "target_reward": self.target_reward,
            "max_steps": self.max_steps,
            "run": self.run.to_dict(),
            "ppo": self.ppo.to_dict(),
            "seed": self.seed,
            "backend": self.backend,
            "backend_options": {k: str(v) for k, v in self.backend_options.items()},
            "architecture": self.architecture,
            "checkpoint_every": self.checkpoint_every,
            "checkpoint_dir": str(self.checkpoint_dir) if self.checkpoint_every and self.checkpoint_dir else None,
            "resume": self.resume,
            "reach_window": self.reach_window,
            "inject_faults": self.faults.describe() if self.faults is not None else None,
        } | ({"env_kwargs": dict(self.env_kwargs)} if self.env_kwargs else {}) | ({"resume_run": self.resume_run.to_dict()} if self.resume_run is not None else {}) | ({"learner": asdict(self.learner)} if self.learner is not None else {})


class FaultsReport(TypedDict, total=False):
    """The faults a run met (:meth:`Trainer.faults_report`): injected, observed and recovered, by
    kind, what the collector did about them and what they cost."""

    spec: str | None
    injected: dict[str, int] | None
    observed: dict[str, int]
    recovered: dict[str, int]
    unrecovered: dict[str, int]
    retries: int
    hedges: int
    hedge_wins: int
    rollouts_used: int
    retry_policy: JsonObject  # the RolloutRetryPolicy's fields
    cost_usd: float
    cost_label: str


@dataclass
class IterationRecord:
    """What happened in one iteration; given to the controller and kept in the result."""

    iteration: int
    env_steps: int  # cumulative, after this iteration
    run: RunShape
    wall_s: float  # measured, whole iteration
    lambda_s: float  # the rollout batch on Lambda (modelled locally; measured/billed otherwise)
    lambda_s_label: str
    learner_s: float  # measured PPO update time (wall)
    learner_cpu_s: float  # CPU time of the PPO update (the trainer thread's)
    host_s: float  # the learner host's share of this iteration on the Lambda clock (iteration_clock.learner_host_s)
    host_speed: float  # the learner host's speed factor applied on the modelled clock (serverless.host_speed); 1.0 otherwise
    iteration_lambda_s: float  # this iteration on the Lambda clock: lambda_s + host_s
    rollout: RolloutSummary  # billing summary of this iteration's invocations
    cost_usd: float  # cumulative
    mean_return: float | None  # mean of the last reach_window completed episodes
    episodes: int  # cumulative completed episodes
    ppo_stats: UpdateStats = field(default_factory=lambda: UpdateStats())
    grad_noise: GradNoiseProbe | None = None
    breakdown: PhaseBreakdown | None = None  # wall time by phase (measured; the checkpoint added once written)
    layout_probe: LayoutProbe | None = None  # counterfactual layouts (serverless.layout_probe), when asked

    def to_dict(self) -> JsonObject:
        data = asdict(self)
        data["run"] = self.run.to_dict()
        data["breakdown"] = None if self.breakdown is None else self.breakdown.to_dict()
        return data


@runtime_checkable
class Controller(Protocol):
    """Consulted after every iteration; may return a new RunShape for the next one."""

    def after_iteration(self, record: IterationRecord) -> RunShape | None: ...


@runtime_checkable
class LayoutProbing(Protocol):
    """A controller that also asks for counterfactual layouts to be measured on the next
    iteration's batch: chunk counts (powers of two) per env segment, () for none
    (:func:`serverless.layout_probe.probe_layouts`)."""

    def layout_probe(self) -> tuple[int, ...]: ...


@dataclass
class TrainResult:
    reached: bool
    env_steps: int
    wall_s: float
    lambda_time_s: float
    lambda_time_label: str
    curve: list[CurvePoint]
    config: JsonObject  # the TrainSpec's to_dict, with the policy spec
    ledger: CostLedger
    iterations: list[IterationRecord]
    episodes: int
    stop_reason: str
    final_mean_return: float | None
    config_changes: list[ConfigChange]
    notes: list[str]
    checkpoint: str | None
    controller_s: float = 0.0  # the controller's time between iterations, in lambda_time_s
    faults: FaultsReport = field(default_factory=lambda: FaultsReport())  # injected, observed and recovered, by kind
    lost_rollouts: int = 0  # slots of trained iterations with no result
    duplicate_rollouts: int = 0  # slots of trained iterations with more than one result used

    @property
    def cost_usd(self) -> float:
        return self.ledger.total_usd

    def to_dict(self) -> JsonObject:
        return {
            "reached": self.reached,
            "env_steps": self.env_steps,
            "wall_s": self.wall_s,
            "wall_s_label": "measured",
            "lambda_time_s": self.lambda_time_s,
            "lambda_time_label": self.lambda_time_label,
            "controller_s": self.controller_s,
            "final_mean_return": self.final_mean_return,
            "episodes": self.episodes,
            "stop_reason": self.stop_reason,
            "reached_definition": "mean return of the last "
            f"{self.config.get('reach_window', 20)} completed training episodes >= target_reward",
            "curve": self.curve,
            "config": self.config,
            "cost_usd": self.cost_usd,
            "ledger": self.ledger.to_dict(),
            "config_changes": self.config_changes,
            "notes": self.notes,
            "checkpoint": self.checkpoint,
            "faults": self.faults,
            "lost_rollouts": self.lost_rollouts,
            "duplicate_rollouts": self.duplicate_rollouts,
            "iterations": [r.to_dict() for r in self.iterations],
        }


# --------------------------------------------------------------------------- progress and billing

class _ProgressBar:
    """A tqdm bar of env steps with reward and cost so far (to stderr)."""

    def __init__(self, enabled: bool, total: int, initial: int) -> None:
        self.bar = None
        if enabled:
            from tqdm import tqdm

            self.bar = tqdm(total=total, initial=initial, unit="step", file=sys.stderr, dynamic_ncols=True)

    def update(self, steps: int, mean_return: float | None, cost: float, label: str) -> None:
        if self.bar is None:
            return
        self.bar.update(steps)
        reward = "-" if mean_return is None else f"{mean_return:.1f}"
        self.bar.set_postfix_str(f"reward {reward}, cost ${cost:.5f} ({label})")

    def close(self) -> None:
        if self.bar is not None:
            self.bar.close()


def bill_rollouts(ledger: CostLedger, got: Collected, notes: list[str]) -> None:
    """Put an iteration's attempts on the ledger: used ones as invocations, the rest as faults."""
    for note in got.batch.notes:
        if note not in notes:
            notes.append(note)
    invocations = got.batch.invocations
    ledger.label = BILLED if invocations and all(inv.billing.label == "billed" for inv in invocations) else MODELLED
    for bill in got.used:
        ledger.add_invocation(bill.charged_ms, bill.memory_mb)
    bill_faults(ledger, got.wasted)


def bill_faults(ledger: CostLedger, wasted: list[tuple[str, Any]]) -> None:
    """Attempts whose result was not used; a throttled call costs nothing (Lambda's 429)."""
    for kind, bill in wasted:
        ledger.add_fault(kind, bill.charged_ms, bill.memory_mb, billed=kind != "throttle")


# --------------------------------------------------------------------------- the run

class _Training:
    """One run's learner, state, ledger and backend, and the steps of an iteration."""

    def __init__(self, spec: TrainSpec, backend: Any, probe_noise_every: int, progress: bool) -> None:
        from serverless.envs import inspect_env

        self.spec = spec
        policy_spec: PolicySpec = inspect_env(spec.env_id, hidden=tuple(spec.ppo.hidden), env_kwargs=spec.env_kwargs)
        self.ppo = replace(spec.ppo)
        if self.ppo.anneal_steps is None:
            self.ppo.anneal_steps = spec.max_steps
        self.lambda_label = BACKENDS.get(spec.backend).clock
        if spec.learner is not None and spec.learner.threads > 1 and self.lambda_label != "modelled":
            self.ppo.torch_threads = spec.learner.threads  # on the learner's own machine: its update threads
        self.learner = PPOLearner(policy_spec, self.ppo, seed=spec.seed)
        prices = PriceTable.for_run(spec.backend, spec.backend_options, spec.price_table)
        # another learner machine: its price, and on the modelled clock its speed band's low end and
        # its update threads' measured speed-up (the update itself runs one thread on this host)
        self.learner_speed = 1.0
        if spec.learner is not None and spec.learner.instance_type != prices.vm_instance_type:
            prices = replace(prices, vm_usd_per_hour=spec.learner.usd_per_hour, vm_instance_type=spec.learner.instance_type)
            self.learner_speed = spec.learner.robust_speed
        self.ledger = CostLedger(prices, architecture=spec.architecture)
        self.ckpt_dir = spec.resolved_checkpoint_dir() if spec.checkpoint_every or spec.resume else None
        self.notes: list[str] = list(self.learner.notes)  # e.g. the update engine, when not the one asked for
        self.records: list[IterationRecord] = []
        self.probe_noise_every = probe_noise_every
        self.state = self._resume() if spec.resume else RunState(run=spec.run, reach_window=spec.reach_window)
        self.own_backend = backend is None
        self.backend = self._backend(backend)
        # stragglers are hedged where they are modelled: behind the fault injector
        self.injector = self.backend if isinstance(self.backend, FaultInjectingBackend) else None
        self.collector = RolloutCollector(self.backend, spec.retry, hedge=self.injector is not None)
        self.collector.tally = self.state.faults
        self.collector.durations.extend(self.state.hedge_history)
        self.bar = _ProgressBar(progress, spec.max_steps, self.state.env_steps)
        self.t_start = time.perf_counter()

    def _resume(self) -> RunState:
        spec = self.spec
        assert self.ckpt_dir is not None  # a resume always has its folder
        saved = load_checkpoint(self.ckpt_dir, identity=spec.identity(), policy_spec=self.learner.spec.to_dict(),
                                learner=self.learner, ignore=("run",) if spec.resume_run is not None else ())
        try:
            state = RunState.from_json(saved, spec.reach_window)
            self.ledger.restore(saved["ledger"])
        except (KeyError, TypeError, ValueError, AttributeError, RunShapeError) as exc:
            raise UserError(
                f"checkpoint in {self.ckpt_dir} cannot be resumed: its run state is malformed "
                f"({type(exc).__name__}: {exc}); start without resume"
            ) from None
        self.notes.append(f"resumed from {self.ckpt_dir} at iteration {state.iteration}, {state.env_steps} env steps")
        if spec.resume_run is not None and spec.resume_run != state.run:
            self.notes.append(f"resumed at run shape {spec.resume_run.to_dict()} instead of the checkpoint's {state.run.to_dict()}")
            state.run = spec.resume_run
        return state

    def _backend(self, backend: Any) -> Any:
        if backend is None:
            from serverless.backends import make_backend

            backend = make_backend(self.spec.backend, **self.spec.backend_options)
        if self.spec.faults is not None:
            backend = FaultInjectingBackend(backend, self.spec.faults)
        if isinstance(backend, FaultInjectingBackend):  # counts carry over a resume
            backend.injected.update(self.state.faults.injected)
            self.state.faults.injected = backend.injected
        return backend

    def run_wall_s(self) -> float:
        return self.state.wall_s_before + time.perf_counter() - self.t_start

    # ------------------------------------------------------------------ one iteration
    def _this_run(self) -> RunShape:
        """The run shape of the next iteration; the last batch shrinks to fit the budget."""
        run = self.state.run
        room = self.spec.max_steps - self.state.env_steps
        return replace(run, batch=max(room, run.actors)) if room < run.batch else run

    def steps_per_env(self, run: RunShape) -> int:
        """The layout of ``run``: its own when a tuner set one, else the PPO config's."""
        return self.ppo.steps_per_env if run.steps_per_env is None else run.steps_per_env

    def _collect(self, clock: IterationClock, run: RunShape) -> Collected:
        """Send the policy out, get one result per slot back, and pay for every attempt."""
        spec, state = self.spec, self.state
        with clock.phase("encode"):
            events = rollout_events(
                spec.env_id, spec.seed, state.iteration, self.learner, run, self.steps_per_env(run), state.slot_episodes,
                spec.env_kwargs,
            )
        try:
            got = clock.rollouts(lambda: self.collector.collect(events, run.memory_mb, run.actors, state.iteration))
        except RolloutsFailed as exc:
            bill_faults(self.ledger, exc.wasted)
            raise
        bill_rollouts(self.ledger, got, self.notes)
        state.count_rollouts(len(events), got.used_ids)
        return got

    def _learn(self, clock: IterationClock, results: list[RolloutReply],
               layouts: tuple[int, ...] = ()) -> tuple[UpdateStats, LayoutProbe | None]:
        """Episodes into the returns window, then GAE and one PPO update (before it, at the
        same parameters, the counterfactual ``layouts`` when asked; their time is the
        breakdown's ``other``)."""
        state = self.state
        state.add_episodes(results)
        mismatched = state.keep_slot_episodes(results)
        if mismatched:
            self.notes.append(
                f"iteration {state.iteration}: slots {mismatched} could not replay their episode "
                f"({self.spec.env_id} is not deterministic under replay); they restarted"
            )
        with clock.phase("decode"):
            segments = decode_segments(results)
        with clock.phase("gae"):
            data = batch_from_segments(segments, self.ppo.gamma, self.ppo.gae_lambda)
        layout_probe = None
        if layouts:
            from serverless.layout_probe import probe_layouts

            layout_probe = probe_layouts(self.learner, segments, data, layouts)
        probe = self.probe_noise_every > 0 and state.iteration % self.probe_noise_every == 0
        with clock.phase("update"):
            stats = self.learner.update(data, probe_noise=probe)
        state.env_steps += int(len(data["obs"]))
        return stats, layout_probe

    def _on_learner_machine(self, times: Any, update_cpu_s: float) -> Any:
        """On the modelled clock, the learner host's part at the learner machine's speed: the
        update's share (its CPU time ``update_cpu_s``, host-speed corrected) also at its threads' speed-up."""
        machine = self.spec.learner
        if not times.modelled or machine is None or (self.learner_speed == 1.0 and machine.threads_speedup == 1.0):
            return times
        update_s = min(times.host_s, update_cpu_s * times.host_speed)
        host_s = machine.host_s(update_s, times.host_s - update_s, base_speed=self.learner_speed)
        return replace(times, host_s=host_s, lambda_s=times.lambda_s + host_s - times.host_s)

    def iterate(self, layouts: tuple[int, ...] = ()) -> tuple[IterationRecord, IterationClock]:
        """Rollouts, one PPO update (and the ``layouts`` probe), the clocks, the record and the curve point."""
        clock = IterationClock(self.lambda_label == "modelled")
        run = self._this_run()
        got = self._collect(clock, run)
        self.lambda_label = got.batch.lambda_s_label
        steps_before = self.state.env_steps
        stats, layout_probe = self._learn(clock, got.results, layouts)
        times = clock.stop(
            rollout_lambda_s=got.batch.lambda_s, rollout_wall_s=got.batch.wall_s, modelled=self.lambda_label == "modelled"
        )
        times = self._on_learner_machine(times, float(stats["learner_cpu_s"]))
        self.state.lambda_time_s += times.lambda_s
        self.ledger.add_learner_time(times.lambda_s)
        record = self._record(run, got, times, stats, layout_probe)
        record.breakdown = clock.breakdown(got.results)
        self.ledger.add_phase_times(record.breakdown.to_dict()["phases_s"])
        self.records.append(record)
        self._progress(record, self.state.env_steps - steps_before)
        self.state.iteration += 1
        return record, clock

    def _record(self, run: RunShape, got: Collected, times: Any, stats: UpdateStats,
                layout_probe: LayoutProbe | None) -> IterationRecord:
        rollout = rollout_summary(got.batch)
        if got.rounds > 1:
            rollout["rounds"] = got.rounds
            rollout["wasted_attempts"] = len(got.wasted)
        return IterationRecord(
            iteration=self.state.iteration,
            env_steps=self.state.env_steps,
            run=run,
            wall_s=times.wall_s,
            lambda_s=got.batch.lambda_s,
            lambda_s_label=got.batch.lambda_s_label,
            learner_s=float(stats["learner_s"]),
            learner_cpu_s=float(stats["learner_cpu_s"]),
            host_s=times.host_s,
            host_speed=times.host_speed,
            iteration_lambda_s=times.lambda_s,
            rollout=rollout,
            cost_usd=self.ledger.total_usd,
            mean_return=self.state.mean_recent(),
            episodes=self.state.episodes,
            grad_noise=stats.pop("grad_noise", None),
            layout_probe=layout_probe,
            ppo_stats=stats,
        )

    def _progress(self, record: IterationRecord, steps: int) -> None:
        """The learning curve's point and the progress bar."""
        state, ledger = self.state, self.ledger
        state.curve.append(
            {
                "iteration": state.iteration,
                "env_steps": state.env_steps,
                "wall_s": self.run_wall_s(),
                "lambda_time_s": state.lambda_time_s,
                "mean_return": record.mean_return,
                "episodes": state.episodes,
                "cost_usd": ledger.total_usd,
            }
        )
        self.bar.update(steps, record.mean_return, ledger.total_usd, "modelled" if ledger.label == MODELLED else "billed")

    # ------------------------------------------------------------------ between iterations
    def consult(self, controller: Controller, record: IterationRecord, clock: IterationClock) -> None:
        """The controller may re-plan; its time is the learner host's."""
        state = self.state
        new_run, seconds = clock.time_controller(lambda: controller.after_iteration(record))
        state.controller_s += seconds
        state.lambda_time_s += seconds
        self.ledger.add_learner_time(seconds)
        if new_run is not None and new_run != state.run:
            if not isinstance(new_run, RunShape):
                raise TypeError(f"the controller returned {new_run!r}, not a RunShape")
            state.config_changes.append(
                {"iteration": state.iteration, "env_steps": state.env_steps, "from": state.run.to_dict(), "to": new_run.to_dict()}
            )
            state.run = new_run

    def checkpoint(self) -> None:
        """Write the checkpoint; its time joins the last iteration's breakdown."""
        t0 = time.perf_counter()
        assert self.ckpt_dir is not None  # checkpoint_every > 0 always has its folder
        self.state.hedge_history = list(self.collector.durations)
        save_checkpoint(
            self.ckpt_dir,
            identity=self.spec.identity(),
            policy_spec=self.learner.spec.to_dict(),
            learner_state=self.learner.state_dict(),
            run_state=self.state.to_json(self.spec.env_id, self.run_wall_s(), self.ledger),
        )
        seconds = time.perf_counter() - t0
        last = self.records[-1] if self.records else None
        if last is not None and last.breakdown is not None:
            last.breakdown = last.breakdown.with_checkpoint(seconds)
        self.ledger.add_phase_times({"checkpoint_s": seconds})

    def close(self) -> None:
        self.bar.close()
        if self.own_backend:
            self.backend.close()

    # ------------------------------------------------------------------ the result
    def faults_report(self) -> FaultsReport:
        tally = self.state.faults
        return {
            "spec": self.injector.spec.describe() if self.injector is not None else None,
            "injected": dict(tally.injected) if self.injector is not None else None,
            "observed": dict(tally.observed),
            "recovered": dict(tally.recovered),
            "unrecovered": {k: tally.observed[k] - tally.recovered.get(k, 0) for k in tally.observed},
            "retries": tally.retries,
            "hedges": tally.hedges,
            "hedge_wins": tally.hedge_wins,
            "rollouts_used": self.state.rollouts_used,
            "retry_policy": asdict(self.spec.retry),
            "cost_usd": self.ledger.fault_usd,
            "cost_label": self.ledger.label,
        }

    def result(self, stop_reason: str) -> TrainResult:
        config = self.spec.to_dict()
        config["policy_spec"] = self.learner.spec.to_dict()
        config["ppo"]["anneal_steps"] = self.ppo.anneal_steps
        state = self.state
        return TrainResult(
            reached=stop_reason == "reached",
            env_steps=state.env_steps,
            wall_s=self.run_wall_s(),
            lambda_time_s=state.lambda_time_s,
            lambda_time_label=self.lambda_label,
            curve=state.curve,
            config=config,
            ledger=self.ledger,
            iterations=self.records,
            episodes=state.episodes,
            stop_reason=stop_reason,
            final_mean_return=state.mean_recent(),
            config_changes=state.config_changes,
            notes=self.notes,
            checkpoint=str(self.ckpt_dir) if self.spec.checkpoint_every else None,
            controller_s=state.controller_s,
            faults=self.faults_report(),
            lost_rollouts=state.lost_rollouts,
            duplicate_rollouts=state.duplicate_rollouts,
        )


def train(
    spec: TrainSpec,
    backend: Any = None,
    controller: Controller | None = None,
    probe_noise_every: int = 0,
    progress: bool = True,
) -> TrainResult:
    """Train until ``spec.target_reward`` is reached or ``spec.max_steps`` are used."""
    spec.validate()
    if spec.checkpoint_dir is None and (spec.checkpoint_every or spec.resume):
        spec = replace(spec, checkpoint_dir=spec.resolved_checkpoint_dir())  # this run's own, found or made once
    run = _Training(spec, backend, probe_noise_every, progress)
    state, every = run.state, spec.checkpoint_every
    stop_reason = "reached" if state.reached(spec.target_reward) else "max_steps"
    try:
        if every and not spec.resume:
            run.checkpoint()  # iteration 0: a run killed during its first iteration can resume too
        while stop_reason != "reached" and state.env_steps < spec.max_steps:
            try:
                record, clock = run.iterate(controller.layout_probe() if isinstance(controller, LayoutProbing) else ())
            except RolloutsFailed as exc:
                stop_reason = f"faults: {exc}"
                run.notes.append(f"stopped at iteration {state.iteration}: {exc}; resume once the faults clear")
                break
            if state.reached(spec.target_reward):
                stop_reason = "reached"
            if controller is not None and stop_reason != "reached":
                run.consult(controller, record, clock)
            if every and state.iteration % every == 0:
                run.checkpoint()
        if every and run.records and (state.iteration % every or stop_reason.startswith("faults")):
            run.checkpoint()  # the last iteration (unless just saved), or the faults' cost at a stop
    finally:
        run.close()
    return run.result(stop_reason)
