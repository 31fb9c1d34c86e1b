"""The actor-learner loop: serverless rollouts, a PPO learner, a cost ledger.

Each iteration:

1. export the policy to numpy arrays, encode them once as ``.npz`` (base64);
2. invoke ``actors`` rollout functions through the backend, each for
   ``batch / actors`` env steps (the remainder spread over the first actors); with
   ``PPOConfig.steps_per_env`` set, the batch is split into env slots first and the
   functions share the slots out (:func:`serverless.slots.slot_plan`);
3. compute GAE per segment and run one PPO update;
4. account the cost (function GB-s, requests, learner VM time), record the
   iteration, ask the controller (if any) for a new :class:`RunConfig`,
   checkpoint every ``checkpoint_every`` iterations.

**Reached** means: the mean return of the last ``reach_window`` (default 20)
*completed training episodes* (the stochastic policy, as it trains) is at least
``target_reward``. The run stops as soon as that holds, or when ``max_steps`` env
steps have been used (checked after each iteration, so a run may overshoot
``max_steps`` by less than one batch only if the batch does not divide it; we
shrink the last batch so it never does).

**Clocks.** ``wall_s`` is measured on this machine. ``lambda_time_s`` is the run's
time on Lambda: per iteration the backend's ``lambda_s`` (modelled by the local
emulator, measured on Ray and AWS) plus the learner host's time (its CPU time on the
modelled clock, its wall time otherwise: ``_learner_host_s``); the learner VM is
priced for that time. Each ``IterationRecord`` carries its own ``iteration_lambda_s``.
On the modelled clock, CPU times are corrected for the host's momentary speed
(``serverless.host_speed``: a metronome around the timed work); ``host_speed`` in each
record is the learner's factor, and each invocation's ``emulator`` block the function's.
The controller's work between iterations (a tuner observing the record and re-planning)
runs on the learner host too and the next iteration waits for it: its time, measured the
same way (CPU time at the iteration's speed factor on the modelled clock, wall time
otherwise), is added to ``lambda_time_s`` and priced as learner-VM time, but kept out of
the iteration records (``controller_s`` totals it), which hold the iterations alone.
"""

from __future__ import annotations

import json
import math
import sys
import time
from collections import deque
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Any, Protocol, runtime_checkable

import numpy as np

from serverless import host_speed
from serverless.invocation import InvokeBatch
from serverless.invocation import check_memory_mb
from serverless.ledger import BILLED, MODELLED, CostLedger
from serverless.policy import PolicySpec, decode_npz_field, encode_b64, export_numpy
from serverless.ppo import PPOConfig, PPOLearner, compute_gae
from serverless.presets import DEFAULT_ACTORS, DEFAULT_MEMORY_MB
from serverless.backends import BACKENDS
from serverless.pricing import ARCHITECTURES, PriceTable
from serverless.slots import slot_plan
from core.errors import UserError


@dataclass(frozen=True)
class RunConfig:
    """What the tuner may change between iterations."""

    actors: int = DEFAULT_ACTORS
    memory_mb: int = DEFAULT_MEMORY_MB
    batch: int = 256  # env steps per iteration, split over the actors

    def validate(self) -> None:
        if isinstance(self.actors, bool) or not isinstance(self.actors, int) or self.actors < 1:
            raise UserError(f"actors must be a whole number >= 1, got {self.actors!r}")
        check_memory_mb(self.memory_mb)
        if isinstance(self.batch, bool) or not isinstance(self.batch, int) or self.batch < self.actors:
            raise UserError(
                f"batch ({self.batch!r} env steps per iteration) must be a whole number >= actors ({self.actors}): "
                "every actor needs at least one step"
            )

    def steps_per_actor(self) -> list[int]:
        base, extra = divmod(self.batch, self.actors)
        return [base + (1 if i < extra else 0) for i in range(self.actors)]

    def to_dict(self) -> dict[str, int]:
        return asdict(self)


@dataclass
class TrainSpec:
    env_id: str
    target_reward: float
    max_steps: int = 100_000
    run: RunConfig = field(default_factory=RunConfig)
    ppo: PPOConfig = field(default_factory=PPOConfig)
    seed: int = 0
    backend: str = "local"
    backend_options: dict[str, Any] = field(default_factory=dict)
    architecture: str = "x86_64"
    checkpoint_every: int = 10  # iterations; 0 = never
    checkpoint_dir: Path | None = None  # default .trainwise/checkpoints/<env>-seed<S>
    resume: bool = False
    # when resuming from a checkpoint, continue at this run shape instead of the checkpoint's
    resume_run: RunConfig | None = None
    reach_window: int = 20
    price_table: Path | None = None

    def validate(self) -> None:
        """Every check that can fail, before any work starts."""
        if not isinstance(self.target_reward, (int, float)) or not math.isfinite(self.target_reward):
            raise UserError(f"target reward must be a finite number, got {self.target_reward!r}")
        if isinstance(self.max_steps, bool) or not isinstance(self.max_steps, int) or self.max_steps < 1:
            raise UserError(f"max steps must be a whole number >= 1, got {self.max_steps!r}")
        self.run.validate()
        if self.resume_run is not None:
            self.resume_run.validate()
        self.ppo.validate()
        if self.architecture not in ARCHITECTURES:
            raise UserError(f"architecture {self.architecture!r} is not allowed; allowed: {', '.join(ARCHITECTURES)}")
        BACKENDS.get(self.backend)  # an unknown name: a UserError listing the registered backends
        if self.checkpoint_every < 0:
            raise UserError(f"checkpoint every must be >= 0 iterations, got {self.checkpoint_every}")
        if self.reach_window < 1:
            raise UserError(f"reach window must be >= 1 episode, got {self.reach_window}")

    def resolved_checkpoint_dir(self) -> Path:
        if self.checkpoint_dir is not None:
            return Path(self.checkpoint_dir)
        from core.paths import cache_dir

        return cache_dir("checkpoints") / f"{self.env_id.replace('/', '_')}-seed{self.seed}"

    def to_dict(self) -> dict[str, Any]:
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
            "checkpoint_dir": str(self.resolved_checkpoint_dir()) if self.checkpoint_every else None,
            "resume": self.resume,
            "reach_window": self.reach_window,
        }


@dataclass
class IterationRecord:
    """What happened in one iteration; given to the controller and kept in the result."""

    iteration: int
    env_steps: int  # cumulative, after this iteration
    run: RunConfig
    wall_s: float  # measured, whole iteration
    lambda_s: float  # the rollout batch on Lambda (modelled locally; measured/billed otherwise)
    lambda_s_label: str
    learner_s: float  # measured PPO update time (wall)
    learner_cpu_s: float  # CPU time of the PPO update (the trainer thread's)
    host_s: float  # the learner host's share of this iteration on the Lambda clock (see _learner_host_s)
    host_speed: float  # the learner host's speed factor applied on the modelled clock (serverless.host_speed); 1.0 otherwise
    iteration_lambda_s: float  # this iteration on the Lambda clock: lambda_s + host_s
    rollout: dict[str, Any]  # billing summary of this iteration's invocations
    cost_usd: float  # cumulative
    mean_return: float | None  # mean of the last reach_window completed episodes
    episodes: int  # cumulative completed episodes
    ppo_stats: dict[str, Any] = field(default_factory=dict)
    grad_noise: dict[str, Any] | None = None

    def to_dict(self) -> dict[str, Any]:
        data = asdict(self)
        data["run"] = self.run.to_dict()
        return data


@runtime_checkable
class Controller(Protocol):
    """Consulted after every iteration; may return a new RunConfig for the next one."""

    def after_iteration(self, record: IterationRecord) -> RunConfig | None: ...


@dataclass
class TrainResult:
    reached: bool
    env_steps: int
    wall_s: float
    lambda_time_s: float
    lambda_time_label: str
    curve: list[dict[str, Any]]
    config: dict[str, Any]
    ledger: CostLedger
    iterations: list[IterationRecord]
    episodes: int
    stop_reason: str
    final_mean_return: float | None
    config_changes: list[dict[str, Any]]
    notes: list[str]
    checkpoint: str | None
    controller_s: float = 0.0  # the controller's time between iterations, in lambda_time_s

    @property
    def cost_usd(self) -> float:
        return self.ledger.total_usd

    def to_dict(self) -> dict[str, Any]:
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
            "iterations": [r.to_dict() for r in self.iterations],
        }


# --------------------------------------------------------------------------- batch assembly

def decode_trajectories(result: dict[str, Any]) -> dict[str, np.ndarray]:
    """A handler result's trajectories (npz, never pickle), inline or from S3."""
    return decode_npz_field(result, "trajectories")


_STEP_ARRAYS = ("obs", "actions", "logprobs", "values", "rewards", "terminated", "truncated", "trunc_values")


def _segments(tr: dict[str, np.ndarray]) -> list[tuple[int | None, dict[str, np.ndarray], float]]:
    """A result's segments as (slot or None, arrays, last value); one unless it ran slots."""
    if "segment_lengths" not in tr:
        return [(None, tr, float(tr["last_value"]))]
    out, start = [], 0
    for slot, n, last in zip(tr["segment_slots"], tr["segment_lengths"], tr["last_value"]):
        end = start + int(n)
        out.append((int(slot), {k: tr[k][start:end] for k in _STEP_ARRAYS}, float(last)))
        start = end
    return out


def assemble_batch(results: list[dict[str, Any]], gamma: float, lam: float) -> dict[str, np.ndarray]:
    """Concatenate the segments, with GAE advantages and returns computed per segment.

    Segments from env slots are put in slot order, so the batch (and the minibatches the
    learner draws from it) does not depend on which function ran which slot."""
    segments = [seg for result in results for seg in _segments(decode_trajectories(result))]
    if all(slot is not None for slot, _, _ in segments):
        segments.sort(key=lambda seg: seg[0])
    parts: dict[str, list[np.ndarray]] = {k: [] for k in ("obs", "actions", "logprobs", "values", "advantages", "returns")}
    for _, tr, last_value in segments:
        adv, ret = compute_gae(
            tr["rewards"], tr["values"], tr["terminated"], tr["truncated"], tr["trunc_values"],
            last_value, gamma, lam,
        )
        for k in ("obs", "actions", "logprobs", "values"):
            parts[k].append(tr[k])
        parts["advantages"].append(adv)
        parts["returns"].append(ret)
    return {k: np.concatenate(v) for k, v in parts.items()}


def _event_seed(seed: int, iteration: int, actor_id: int) -> int:
    return int(np.random.SeedSequence([seed, iteration, actor_id]).generate_state(1)[0])


def _learner_host_s(*, modelled: bool, host_cpu_s: float, host_wall_s: float) -> float:
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


def _rollout_summary(batch: InvokeBatch) -> dict[str, Any]:
    bills = [inv.billing for inv in batch.invocations]
    ok = [b for b in bills if b.error is None]
    return {
        "invocations": len(bills),
        "errors": len(bills) - len(ok),
        "cold_starts": sum(1 for b in bills if b.cold_start),
        # env slots rebuilt by replay on an instance that did not have them (serverless.handler)
        "replayed_slots": sum(int(inv.result.get("replayed_slots", 0)) for inv in batch.invocations if inv.result),
        "billed_ms_total": sum(b.billed_ms for b in bills),
        "mean_duration_ms": float(np.mean([b.duration_ms for b in ok])) if ok else None,
        "max_duration_ms": float(max(b.duration_ms for b in ok)) if ok else None,
        "billing_label": bills[0].label if bills else None,
        "measured_wall_s": batch.wall_s,
        "lambda_s": batch.lambda_s,
        "lambda_s_label": batch.lambda_s_label,
        "concurrency": batch.concurrency,
    }


# --------------------------------------------------------------------------- run state and checkpoints

@dataclass
class _RunState:
    """Where the run stands: everything a checkpoint carries besides the learner."""

    run: RunConfig
    reach_window: int
    iteration: int = 0
    env_steps: int = 0
    lambda_time_s: float = 0.0
    controller_s: float = 0.0  # part of lambda_time_s: the controller's work between iterations
    wall_s_before: float = 0.0  # measured wall time of the run before this process resumed it
    recent_returns: deque[float] = field(default_factory=deque)
    episodes: int = 0
    curve: list[dict[str, Any]] = field(default_factory=list)
    config_changes: list[dict[str, Any]] = field(default_factory=list)
    # env slots: each slot's episode in progress, as its last result gave it (sent back
    # with the slot so that any instance continues it; serverless.handler)
    slot_episodes: dict[int, dict[str, Any]] = field(default_factory=dict)

    def __post_init__(self) -> None:
        self.recent_returns = deque(self.recent_returns, maxlen=self.reach_window)

    def keep_slot_episodes(self, results: list[dict[str, Any]]) -> list[int]:
        """Remember each slot's episode in progress; return the slots whose replay failed."""
        mismatched: list[int] = []
        for res in results:
            for episode in res.get("slot_episodes", []):
                self.slot_episodes[int(episode["slot"])] = {k: v for k, v in episode.items() if k != "slot"}
            mismatched += [int(k) for k in res.get("replay_mismatch", [])]
        return mismatched

    def add_episodes(self, results: list[dict[str, Any]]) -> None:
        """Actor order; with env slots, slot order (episodes of one slot in their order)."""
        finished: list[tuple[int | None, float]] = []
        for res in results:
            slots = res.get("episode_slots") or [None] * len(res["episode_returns"])
            finished += [(slot, float(ret)) for slot, ret in zip(slots, res["episode_returns"])]
        if finished and all(slot is not None for slot, _ in finished):
            finished.sort(key=lambda item: item[0])  # stable: a slot's own episodes keep their order
        for _, ret in finished:
            self.recent_returns.append(ret)
            self.episodes += 1

    def mean_recent(self) -> float | None:
        return float(np.mean(self.recent_returns)) if self.recent_returns else None

    def reached(self, target: float) -> bool:
        """Mean of the last ``reach_window`` completed training episodes >= target."""
        return len(self.recent_returns) >= self.reach_window and float(np.mean(self.recent_returns)) >= target

    def to_json(self, env_id: str, wall_s: float, ledger: CostLedger) -> dict[str, Any]:
        return {
            "env_id": env_id,
            "iteration": self.iteration,
            "env_steps": self.env_steps,
            "lambda_time_s": self.lambda_time_s,
            "controller_s": self.controller_s,
            "wall_s": wall_s,
            "recent_returns": list(self.recent_returns),
            "episodes": self.episodes,
            "curve": self.curve,
            "config_changes": self.config_changes,
            "run": self.run.to_dict(),
            "ledger": ledger.totals(),
            "slot_episodes": {str(k): v for k, v in self.slot_episodes.items()},
        }

    @classmethod
    def from_json(cls, state: dict[str, Any], reach_window: int) -> "_RunState":
        return cls(
            run=RunConfig(**state["run"]),
            reach_window=reach_window,
            iteration=int(state["iteration"]),
            env_steps=int(state["env_steps"]),
            lambda_time_s=float(state["lambda_time_s"]),
            controller_s=float(state.get("controller_s", 0.0)),
            wall_s_before=float(state["wall_s"]),
            recent_returns=deque(state["recent_returns"]),
            episodes=int(state["episodes"]),
            curve=list(state["curve"]),
            config_changes=list(state["config_changes"]),
            slot_episodes={int(k): v for k, v in state.get("slot_episodes", {}).items()},
        )


_CKPT_MODEL = "learner.pt"
_CKPT_STATE = "trainer.json"


def _save_checkpoint(directory: Path, learner: PPOLearner, state: dict[str, Any]) -> None:
    import torch

    directory.mkdir(parents=True, exist_ok=True)
    tmp = directory / (_CKPT_MODEL + ".tmp")
    torch.save(learner.state_dict(), tmp)
    tmp.replace(directory / _CKPT_MODEL)
    tmp_state = directory / (_CKPT_STATE + ".tmp")
    tmp_state.write_text(json.dumps(state))
    tmp_state.replace(directory / _CKPT_STATE)


def _load_checkpoint(directory: Path, learner: PPOLearner) -> dict[str, Any]:
    import torch

    model_path, state_path = directory / _CKPT_MODEL, directory / _CKPT_STATE
    if not (model_path.exists() and state_path.exists()):
        raise UserError(f"--resume: no checkpoint in {directory} (expected {_CKPT_MODEL} and {_CKPT_STATE})")
    learner.load_state_dict(torch.load(model_path, weights_only=True))
    return json.loads(state_path.read_text())


# --------------------------------------------------------------------------- one iteration's pieces

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


def rollout_events(
    env_id: str,
    seed: int,
    iteration: int,
    learner: PPOLearner,
    run: RunConfig,
    steps_per_env: int = 0,
    slot_episodes: dict[int, dict[str, Any]] | None = None,
) -> list[dict[str, Any]]:
    """One event per actor; the weights are encoded once and shared by all.

    ``steps_per_env`` > 0: each event carries its env slots, each seeded by (seed,
    iteration, slot) and with its episode in progress from ``slot_episodes`` when known,
    so a slot's env and actions do not depend on the function (or instance) that runs it.
    """
    weights_b64 = encode_b64(export_numpy(learner.model))
    spec_dict = learner.spec.to_dict()
    events = [
        {
            "env_id": env_id,
            "num_steps": n,
            "seed": _event_seed(seed, iteration, actor_id),
            "policy_spec": spec_dict,
            "actor_id": actor_id,
            "weights_npz_b64": weights_b64,
        }
        for actor_id, n in enumerate(run.steps_per_actor())
    ]
    if steps_per_env > 0:
        for event, slots in zip(events, slot_plan(run.batch, run.actors, steps_per_env)):
            event["slots"] = [
                {"slot": k, "num_steps": n, "seed": _event_seed(seed, iteration, k)}
                | ({"episode": slot_episodes[k]} if slot_episodes and k in slot_episodes else {})
                for k, n in slots
            ]
            event["num_steps"] = sum(n for _, n in slots)
    return events


def _account(batch: InvokeBatch, ledger: CostLedger, notes: list[str], iteration: int) -> list[dict[str, Any]]:
    """Bill every invocation, note failures and new backend notes; return the results."""
    for note in batch.notes:
        if note not in notes:
            notes.append(note)
    if batch.invocations and all(inv.billing.label == "billed" for inv in batch.invocations):
        ledger.label = BILLED
    else:
        ledger.label = MODELLED
    for inv in batch.invocations:
        ledger.add_invocation(inv.billing.billed_ms, inv.billing.memory_mb)
    # Attempts that ran, were billed, failed and were retried (Lambda backend only).
    for bill in getattr(batch, "retried_billing", []):
        ledger.add_invocation(bill.billed_ms, bill.memory_mb)
    results = [inv.result for inv in batch.invocations if inv.result is not None]
    if not results:
        errors = sorted({str(inv.billing.error) for inv in batch.invocations})
        raise RuntimeError(f"every rollout of iteration {iteration} failed: {'; '.join(errors)}")
    failed = len(batch.invocations) - len(results)
    if failed:
        notes.append(f"iteration {iteration}: {failed} of {len(batch.invocations)} rollouts failed; trained on the rest")
    return results


# --------------------------------------------------------------------------- the loop

def train(
    spec: TrainSpec,
    backend: Any = None,
    controller: Controller | None = None,
    probe_noise_every: int = 0,
    progress: bool = True,
) -> TrainResult:
    """Train until ``spec.target_reward`` is reached or ``spec.max_steps`` are used."""
    from serverless.envs import inspect_env

    spec.validate()
    policy_spec: PolicySpec = inspect_env(spec.env_id, hidden=tuple(spec.ppo.hidden))
    ppo = replace(spec.ppo)
    if ppo.anneal_steps is None:
        ppo.anneal_steps = spec.max_steps
    learner = PPOLearner(policy_spec, ppo, seed=spec.seed)
    ledger = CostLedger(PriceTable.load(spec.price_table), architecture=spec.architecture)
    ckpt_dir = spec.resolved_checkpoint_dir()
    notes: list[str] = []
    if spec.resume:
        saved = _load_checkpoint(ckpt_dir, learner)
        if saved["env_id"] != spec.env_id:
            raise UserError(f"--resume: the checkpoint in {ckpt_dir} is for {saved['env_id']}, not {spec.env_id}")
        state = _RunState.from_json(saved, spec.reach_window)
        if spec.resume_run is not None:
            state.run = spec.resume_run
        ledger.restore(saved["ledger"])
        notes.append(f"resumed from {ckpt_dir} at iteration {state.iteration}, {state.env_steps} env steps")
    else:
        state = _RunState(run=spec.run, reach_window=spec.reach_window)

    own_backend = backend is None
    if own_backend:
        from serverless.backends import make_backend

        backend = make_backend(spec.backend, **spec.backend_options)
    records: list[IterationRecord] = []
    bar = _ProgressBar(progress, spec.max_steps, state.env_steps)
    lambda_label = BACKENDS.get(spec.backend).clock
    t_start = time.perf_counter()

    def run_wall_s() -> float:
        return state.wall_s_before + time.perf_counter() - t_start

    def checkpoint() -> None:
        _save_checkpoint(ckpt_dir, learner, state.to_json(spec.env_id, run_wall_s(), ledger))

    stop_reason = "reached" if state.reached(spec.target_reward) else "max_steps"
    try:
        while stop_reason != "reached" and state.env_steps < spec.max_steps:
            # the learner host's speed right now (modelled clock only; outside the timed work)
            speed = host_speed.Bracket("learner") if lambda_label == "modelled" else None
            if speed is not None:
                speed.start()
            t_iter = time.perf_counter()
            c_iter = time.thread_time()
            # 1. the policy out to the functions (the last batch shrinks to fit the budget)
            run = state.run
            room = spec.max_steps - state.env_steps
            this_run = replace(run, batch=max(room, run.actors)) if room < run.batch else run
            events = rollout_events(
                spec.env_id, spec.seed, state.iteration, learner, this_run, ppo.steps_per_env, state.slot_episodes
            )
            # 2. rollouts, billed
            c_invoke = time.thread_time()
            batch = backend.invoke(events, this_run.memory_mb, concurrency=this_run.actors)
            c_invoke = time.thread_time() - c_invoke
            lambda_label = batch.lambda_s_label
            results = _account(batch, ledger, notes, state.iteration)
            state.add_episodes(results)
            mismatched = state.keep_slot_episodes(results)
            if mismatched:
                notes.append(
                    f"iteration {state.iteration}: slots {mismatched} could not replay their episode "
                    f"({spec.env_id} is not deterministic under replay); they restarted"
                )
            # 3. GAE and one PPO update
            data = assemble_batch(results, ppo.gamma, ppo.gae_lambda)
            probe = probe_noise_every > 0 and state.iteration % probe_noise_every == 0
            stats = learner.update(data, probe_noise=probe)
            learner_s = float(stats["learner_s"])
            steps = int(len(data["obs"]))
            state.env_steps += steps
            # 4. clocks and cost: on Lambda the learner waits for the functions, then updates
            iter_wall = time.perf_counter() - t_iter
            host_cpu_s = time.thread_time() - c_iter - c_invoke
            modelled = batch.lambda_s_label == "modelled"
            speed_factor = speed.stop() if speed is not None and modelled else 1.0
            host_s = _learner_host_s(
                modelled=modelled,
                host_cpu_s=host_cpu_s * speed_factor,
                host_wall_s=iter_wall - batch.wall_s,
            )
            iter_lambda_time = batch.lambda_s + host_s
            state.lambda_time_s += iter_lambda_time
            ledger.add_learner_time(iter_lambda_time)
            record = IterationRecord(
                iteration=state.iteration,
                env_steps=state.env_steps,
                run=this_run,
                wall_s=iter_wall,
                lambda_s=batch.lambda_s,
                lambda_s_label=batch.lambda_s_label,
                learner_s=learner_s,
                learner_cpu_s=float(stats["learner_cpu_s"]),
                host_s=host_s,
                host_speed=speed_factor,
                iteration_lambda_s=iter_lambda_time,
                rollout=_rollout_summary(batch),
                cost_usd=ledger.total_usd,
                mean_return=state.mean_recent(),
                episodes=state.episodes,
                grad_noise=stats.pop("grad_noise", None),
                ppo_stats=stats,
            )
            records.append(record)
            state.curve.append(
                {
                    "iteration": state.iteration,
                    "env_steps": state.env_steps,
                    "wall_s": run_wall_s(),
                    "lambda_time_s": state.lambda_time_s,
                    "mean_return": record.mean_return,
                    "episodes": state.episodes,
                    "cost_usd": ledger.total_usd,
                }
            )
            bar.update(steps, record.mean_return, ledger.total_usd, "modelled" if ledger.label == MODELLED else "billed")
            state.iteration += 1
            if state.reached(spec.target_reward):
                stop_reason = "reached"
            # 5. the controller may re-plan; checkpoint
            if controller is not None and stop_reason != "reached":
                c_ctl, t_ctl = time.thread_time(), time.perf_counter()
                new_run = controller.after_iteration(record)
                ctl_s = _learner_host_s(
                    modelled=modelled,
                    host_cpu_s=(time.thread_time() - c_ctl) * speed_factor,
                    host_wall_s=time.perf_counter() - t_ctl,
                )
                state.controller_s += ctl_s
                state.lambda_time_s += ctl_s
                ledger.add_learner_time(ctl_s)
                if new_run is not None and new_run != state.run:
                    new_run.validate()
                    state.config_changes.append(
                        {"iteration": state.iteration, "env_steps": state.env_steps, "from": state.run.to_dict(), "to": new_run.to_dict()}
                    )
                    state.run = new_run
            if spec.checkpoint_every and state.iteration % spec.checkpoint_every == 0:
                checkpoint()
        if spec.checkpoint_every and records:
            checkpoint()
    finally:
        bar.close()
        if own_backend:
            backend.close()

    config = spec.to_dict()
    config["policy_spec"] = learner.spec.to_dict()
    config["ppo"]["anneal_steps"] = ppo.anneal_steps
    return TrainResult(
        reached=stop_reason == "reached",
        env_steps=state.env_steps,
        wall_s=run_wall_s(),
        lambda_time_s=state.lambda_time_s,
        lambda_time_label=lambda_label,
        curve=state.curve,
        config=config,
        ledger=ledger,
        iterations=records,
        episodes=state.episodes,
        stop_reason=stop_reason,
        final_mean_return=state.mean_recent(),
        config_changes=state.config_changes,
        notes=notes,
        checkpoint=str(ckpt_dir) if spec.checkpoint_every else None,
        controller_s=state.controller_s,
    )
