"""Profiling a workload: a memory probe, then one short pilot run through the real trainer.

* The **memory probe** (``memory_probe.py``) invokes one cold rollout function per
  memory size of the sweep, all at once: each size's warm rollout speed and its
  cold-start time, for about one cold start of time. On the modelled clock it runs
  beside the pilot (they do not depend on each other), so it adds only the part of its
  span that outlasts the pilot's.
* The **pilot** is ordinary training whose run shape a :class:`SweepController` changes
  every iteration along a fixed schedule at one vCPU (1,769 MB) and one batch
  (:func:`pilot_batch`), so a single run measures the concurrency scaling (16 down to 1
  functions) and the gradient noise scale, probed at every iteration (when the search
  has more than one batch to choose between, :func:`noise_probe_every`).
* The **learner timing** (:func:`time_learner_updates`) times the learner's update at
  every batch size the search considers, on a throwaway learner and a synthetic batch:
  the update's cost depends on the batch size, not on the data, and the run's own
  learner never sees it. With it, the update's wall-time speed-up at the thread counts the
  learner machines offer, at the pilot's batch (:mod:`optimizers.seraph.learner_threads`),
  for the plan's choice of the learner's machine.

Because the pilot is real training, its policy need not be thrown away: the tuner
resumes the real run from the pilot's checkpoint (see ``optimizers.seraph.steps.train``), so the
profiling overhead is the memory probe, the learner timing and the price of running the
pilot's 5-8 iterations at sub-optimal shapes, not of that many wasted iterations. The pilot keeps one batch
because changing the batch during training costs env steps to the target (measured on
CartPole, seeds 3-12, each seed's steps over its run from scratch at 4 x 1,769 MB x
1,024, median: 1.28x for the earlier pilot that visited batches of 512-2,048, 1.16x for
the same batches at 4 functions, 0.95x for a pilot that varied only the function count;
``benchmarks/seraph_pilot_effect.py``, docs/seraph.md). The profile itself is cached (``workload_profile.py``) and a second tuning of
the same workload skips all three.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from optimizers.seraph.learner_threads import measure_thread_scaling, synthetic_batch
from optimizers.seraph.memory_probe import charge_learner_wait, cost_probe_sizes, no_probe, probe_memory_sizes
from optimizers.seraph.models import Observation
from serverless.run_shape import RunShape
from optimizers.seraph.noise_scale import NoiseScaleTracker
from optimizers.seraph.space import DEFAULT_MEMORY_SWEEP
from optimizers.seraph.workload_profile import PilotSummary, Profile, ProfileNoise, load_profile, save_profile
from optimizers.seraph.records import observation, view
from optimizers.seraph.defaults import DEFAULT_STEPS_PER_ENV
from core.paths import hardware_fingerprint

if TYPE_CHECKING:
    from optimizers.seraph.references import EnvReferences
    from serverless.presets import Preset
    from serverless.rollout_batch import RolloutSummary

BASE_MEMORY_MB = 1769  # one vCPU: where the concurrency and batch sweeps run


# The batch sizes Seraph searches per built-in env (docs/seraph.md, "Batch sets"): around
# the trainer preset, from 2 minibatches up, and including RLlib's default of 4,000 so the
# static baseline is in the space.
BATCHES: dict[str, tuple[int, ...]] = {
    "CartPole-v1": (512, 1024, 2048, 4000, 8000),
    # 1,024 is left out: its reference runs needed 721,920, 106,496, 1,476,608 and 253,952 env
    # steps (seeds 10-13, measured twice), against 135k-354k at 2,048 on seeds 10-17
    "LunarLander-v3": (2048, 4000, 8192, 16384, 32768),
}


def batches_for(workload: "Workload", preset: "Preset | None" = None) -> tuple[int, ...]:
    """The batch sizes to search: the workload's own (at the baseline's layout, its batch),
    else the env's set (else the preset's batch x 1/4 .. 4, plus 4,000), without batches under two PPO minibatches (the noise probe needs two sizes).
    ``preset``: the env's (:func:`serverless.presets.preset_for`), looked up already (else looked up here)."""
    from serverless.presets import preset_for

    batches = workload.batches or BATCHES.get(workload.env_id)
    if batches is None:
        base = (preset or preset_for(workload.env_id)).run.batch
        batches = tuple(sorted({4000, *(int(base * f) for f in (0.25, 0.5, 1, 2, 4))}))
    mb = int(workload.ppo.get("minibatch_size", 64))
    return tuple(b for b in batches if b >= 2 * mb)


PILOT_ACTORS = (16, 16, 8, 8, 4, 2, 1, 1)
#: The most functions a cost-objective pilot starts (:class:`PilotPlan`). Every function the
#: pilot's first iteration starts is a cold start, and Lambda bills INIT: at 1,769 MB one costs
#: about $1e-5, 7% of a CartPole run. A function the run does not keep is tuning the user pays
#: for; cost plans chose 1-2 functions in 127 of the 151 cost-objective runs recorded under
#: ``benchmarks/results/``. The cost plan does not plan more functions than its pilot visited
#: (:meth:`optimizers.seraph.job.SeraphJob.search_space`). On CartPole, seeds 0-2 (modelled): a
#: pilot of 4, 4, 2, 1 put tuning at 14% of the saving over the static default; 2, 2, 1 with the
#: cap at 0.4%, at the same env steps.
COST_PILOT_TOP_ACTORS = 2
#: How often the pilot visits its first function count: cold, then warm (see :func:`pilot_schedule`).
PILOT_VISITS_PER_COUNT = 2
#: The fewest iterations the pilot runs: the performance model fits no fewer rows, and a
#: cost-objective profile may have no probe rows (:func:`optimizers.seraph.memory_probe.cost_probe_sizes`).
PILOT_MIN_ITERATIONS = 3
#: The fewest env steps one pilot function runs (the tuner's own search allows 32).
PILOT_MIN_STEPS_PER_ACTOR = 32


@dataclass(frozen=True)
class PilotPlan:
    """What the pilot measures: the memory sizes probed (the baseline's included), the
    fewest and the most functions it visits, and the memory size at which the cost
    objective may stop the probe (None: the probe runs the whole sweep)."""

    memory_sweep: tuple[int, ...] = DEFAULT_MEMORY_SWEEP
    min_actors: int = 1
    cost_stop_mb: int | None = None
    top_actors: int = PILOT_ACTORS[0]

    def schedule(self, workload: "Workload") -> list[RunShape]:
        """The shapes the pilot visits for ``workload`` (:func:`pilot_schedule`)."""
        return pilot_schedule(pilot_batch(workload), workload.steps_per_env, self.min_actors, self.top_actors)


def pilot_schedule(batch: int, steps_per_env: int = 0, min_actors: int = 1,
                   top_actors: int = PILOT_ACTORS[0]) -> list[RunShape]:
    """The shapes the pilot visits, one per iteration, in order, all at 1,769 MB and ``batch``.

    Concurrency is swept downward from 16 functions (the first, cold, visit warms every
    actor id the later ones reuse, so there is one cold iteration; the second visit is
    the same shape warm, which measures the cold start); with the batch fixed, the steps
    per function still range 16-fold. The top is 16 functions: each function is a
    request, and the fit's ``log2(actors)`` term extrapolates above it. A small batch
    caps the count so that every function runs ``PILOT_MIN_STEPS_PER_ACTOR`` steps, and
    with env slots (``steps_per_env`` > 0) so that every function has a slot: more
    functions than ``batch // steps_per_env`` would change the slots and what is learned.
    Capping can repeat a count (CartPole's 1,024 with slots of 128: 16, 16, 8, 8 all become
    8). The first count is visited twice, cold then warm; every later count once, because its
    functions are already warm (their actor ids are among the first count's) and a further
    warm visit at the same shape adds no new point to the fit while it costs the learner VM
    an iteration at a shape the plan may not keep (CartPole: 8, 8, 4, 2, 1; LunarLander at
    the static default's layout, one slot of 2,000 per function: 2, 2, 1).
    ``min_actors`` keeps the pilot at or above that many functions: the tuner sets it to the
    baseline's count when the pilot trains at the baseline's layout, where fewer functions
    would run the baseline's slots one after another, each iteration dearer than the
    baseline's (LunarLander's static default: 2, 2, 2, the baseline's own first iterations).
    The search then does not plan fewer functions than the pilot visited
    (:func:`optimizers.seraph.steps.search_space_for`). A schedule shorter than
    :data:`PILOT_MIN_ITERATIONS` repeats its first count.
    ``top_actors`` caps the count from above (a cost-objective pilot starts at most
    :data:`COST_PILOT_TOP_ACTORS` cold functions; ``min_actors`` wins where the two cross).
    The memory sizes are measured by the memory probe, the learner at other batches by
    :func:`time_learner_updates`, not here.
    """
    cap = max(1, batch // max(PILOT_MIN_STEPS_PER_ACTOR, steps_per_env))
    counts = [min(max(min(a, top_actors), min_actors), cap) for a in PILOT_ACTORS]
    first = counts[0]
    visits = {a: PILOT_VISITS_PER_COUNT if a == first else 1 for a in counts}
    kept = [a for i, a in enumerate(counts) if counts[:i].count(a) < visits[a]]
    kept += [first] * (PILOT_MIN_ITERATIONS - len(kept))  # the performance model's fit needs three
    return [RunShape(a, BASE_MEMORY_MB, batch) for a in kept]


def pilot_batch(workload: "Workload", preset: "Preset | None" = None, references: "EnvReferences | None" = None) -> int:
    """The batch the pilot trains at, where the plan most often lands, so that the run
    usually continues at the pilot's batch (a change of batch during training costs env
    steps; see the module's docstring). Of the batches the search considers, the one
    whose reference runs reached the target in the fewest env steps (median), or the
    largest batch whose runs the rank-sum test cannot tell from that one's
    (:func:`~optimizers.seraph.stats.steps_tied_batches`): at equal env steps a larger
    batch takes fewer iterations, so less per-iteration overhead in time and price.
    Without references for the env, the preset's batch if the search has it, else the
    smallest. ``preset`` and ``references``: the env's, looked up and read already (else here)."""
    from optimizers.seraph.stats import steps_tied_batches
    from optimizers.seraph.references import measured_reference
    from serverless.presets import preset_for

    batches = batches_for(workload, preset)
    if len(batches) == 1:
        return batches[0]
    measured = (measured_reference(workload.env_id, workload.steps_per_env) if references is None
                else references.measured(workload.steps_per_env))
    points = {int(b): float(e) for b, e in measured["points"]} if measured else {}
    known = [b for b in batches if b in points]
    if known:
        runs = {b: [float(r["env_steps"]) for r in measured.get("runs", []) if int(r["batch"]) == b] for b in known}
        return max(steps_tied_batches({b: points[b] for b in known}, runs))
    batch = (preset or preset_for(workload.env_id)).run.batch
    return batch if batch in batches else min(batches)


def noise_probe_every(workload: "Workload", every: int) -> int:
    """How often to probe the gradient noise: ``every`` iterations, or never (0) when the
    search considers one batch. The noise scale shapes the env steps across batches; with one
    batch it informs no choice, and a probe costs about 8% of a PPO update (LunarLander at
    4,000, 10 epochs: 0.376 s against 0.348 s of learner CPU, measured)."""
    return every if len(batches_for(workload)) > 1 else 0


def time_learner_updates(
    workload: "Workload", batches: tuple[int, ...], *, seed: int = 0, modelled: bool = True,
) -> list[dict[str, Any]]:
    """The learner's update time at each batch size: one epoch of a PPO update of a
    throwaway learner on a synthetic batch (random observations and actions, the
    workload's network and PPO settings), times the workload's epochs. Update time
    depends on the batch size, the epochs and the minibatch size, not on what the data
    says (unless ``target_kl`` stops an update early). One epoch keeps the timing cheap:
    the learner VM's price per second is high next to the functions' (a full update at
    each of CartPole's batch sizes cost about as much as the whole pilot's functions),
    and the planner takes only the line's shape from this timing, its level from the
    pilot's own updates (``PerformanceModel._fit_learner``). On the modelled clock it is
    CPU time corrected for the host's speed, as the trainer's learner time is
    (``serverless.host_speed``).

    Returns one row per batch: ``batch``, ``timed_s`` (the one epoch, on the run's clock),
    ``learner_cpu_s`` (the same, raw CPU time) and ``learner_s`` (the whole update).
    """
    import numpy as np

    from serverless import host_speed
    from serverless.envs import inspect_env
    from serverless.ppo import PPOConfig, PPOLearner

    ppo = PPOConfig.from_dict(dict(workload.ppo))
    spec = inspect_env(workload.env_id, hidden=ppo.hidden, env_kwargs=workload.env_kwargs)
    rng = np.random.default_rng(seed)
    rows = []
    for batch in batches:
        learner = PPOLearner(spec, replace(ppo, anneal_lr=False, epochs=1), seed=seed)
        data = synthetic_batch(spec, batch, rng)
        bracket = host_speed.Bracket("learner") if modelled else None
        if bracket is not None:
            bracket.start()
        stats = learner.update(data)
        factor = bracket.stop() if bracket is not None else 1.0
        cpu_s = float(stats["learner_cpu_s"])
        one_epoch_s = cpu_s * factor if modelled else float(stats["learner_s"])
        rows.append({"batch": int(batch), "learner_cpu_s": cpu_s, "timed_s": one_epoch_s, "learner_s": one_epoch_s * ppo.epochs})
    return rows


def beside_rollouts(jobs_s: list[float], waits_s: list[float]) -> float:
    """The part of the learner-VM work ``jobs_s`` that does not fit in the learner's idle
    time ``waits_s``, in seconds.

    A synchronous PPO learner waits for every iteration's rollouts (``waits_s``: the
    pilot's rollout times on the Lambda clock, the first one holding the cold starts) with
    its VM idle and billed. Work that needs neither the pilot's data nor its learner, such
    as :func:`time_learner_updates`, can run in those waits; only what does not fit adds
    to the run's time and the VM's bill. Each job is indivisible (one batch size's timing):
    the longest goes first, into the wait with the most room left; a job that fits
    nowhere counts in full. On the local emulator the timing really runs after the pilot,
    which changes no modelled figure (each is its own CPU time), as for the memory probe.
    """
    if any(j < 0 for j in jobs_s) or any(w < 0 for w in waits_s):
        raise ValueError("job and wait times must be at least 0")
    room = sorted(waits_s, reverse=True)
    excess = 0.0
    for job in sorted(jobs_s, reverse=True):
        i = max(range(len(room)), key=room.__getitem__, default=None)
        if i is not None and room[i] >= job:
            room[i] -= job
        else:
            excess += job
    return excess


@dataclass
class SweepController:
    """A trainer controller that walks a fixed schedule of shapes."""

    schedule: list[RunShape]
    records: list[Any] = field(default_factory=list)

    def after_iteration(self, record: Any) -> RunShape | None:
        self.records.append(record)
        nxt = len(self.records)
        if nxt < len(self.schedule):
            return self.schedule[nxt]
        return None


@dataclass
class Workload:
    """What a profile is about. Target reward and seed are not part of it: the pilot's
    measurements do not depend on them, so one profile serves every target and seed."""

    env_id: str
    max_steps: int
    ppo: dict[str, Any]
    architecture: str = "x86_64"
    batches: tuple[int, ...] = ()  # the batches searched at this layout; empty: the env's set
    env_kwargs: dict[str, Any] = field(default_factory=dict)  # gymnasium.make(env_id, **env_kwargs)

    @property
    def steps_per_env(self) -> int:
        """The env slots' length (0: one env per function)."""
        return int(self.ppo.get("steps_per_env", 0) or 0)

    def key_dict(self) -> dict[str, Any]:
        """The profile's key; kwargs only when given, so a profile of the env's own
        defaults keeps the key it has without them."""
        key = {"env_id": self.env_id, "max_steps": self.max_steps, "ppo": self.ppo, "architecture": self.architecture}
        key |= {"env_kwargs": dict(self.env_kwargs)} if self.env_kwargs else {}
        return {**key, "batches": list(self.batches)} if self.batches else key


@dataclass(frozen=True)
class PilotOutcome:
    """A profile and how this run got it: ``reused`` when this run did not run the pilot
    (a cached profile, or one a separate step measured), ``checkpoint_dir`` when it ran the
    pilot with a checkpoint that training resumes from."""

    profile: Profile
    reused: bool
    checkpoint_dir: Path | None = None
    wall_s: float = 0.0  # measured time this run spent getting the profile

    def to_dict(self) -> dict[str, Any]:
        return {"profile": self.profile.as_dict(), "reused": self.reused, "wall_s": self.wall_s,
                "checkpoint_dir": None if self.checkpoint_dir is None else str(self.checkpoint_dir)}

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> "PilotOutcome":
        ckpt = data.get("checkpoint_dir")
        return cls(Profile.from_dict(data["profile"]), reused=bool(data["reused"]),
                   checkpoint_dir=None if ckpt is None else Path(ckpt), wall_s=float(data.get("wall_s", 0.0)))

    def as_reused(self) -> "PilotOutcome":
        """The same profile as a later run sees it: reused, with no checkpoint of this run's."""
        return PilotOutcome(self.profile, reused=True)


def _noise_from_records(records: list[Any]) -> ProfileNoise:
    tracker = NoiseScaleTracker()
    for rec in records:
        r = view(rec)
        if r.grad_noise is None:
            continue
        try:
            tracker.update_from_stats(r.grad_noise, env_steps=r.env_steps)
        except (ValueError, KeyError, TypeError):
            continue
    return ProfileNoise.from_dict({"b_noise": tracker.value, "history": tracker.history, "smoothing_alpha": tracker.alpha})


def _pilot_spec(workload: Workload, backend_name: str, schedule: list[RunShape], seed: int, checkpoint_dir: Path | None) -> Any:
    """The trainer's spec for the pilot: the real run's PPO and learning-rate schedule, as
    many steps as the schedule's iterations, no early stop, only the final checkpoint."""
    from serverless.ppo import PPOConfig
    from serverless.trainer import TrainSpec

    ppo = PPOConfig.from_dict(dict(workload.ppo))
    ppo.anneal_steps = workload.max_steps  # the same learning-rate schedule as the real run
    return TrainSpec(
        env_id=workload.env_id,
        env_kwargs=dict(workload.env_kwargs),
        target_reward=1e30,  # the pilot never stops early (the trainer wants a finite target)
        max_steps=sum(s.batch for s in schedule),
        run=schedule[0].without_layout(),
        ppo=ppo,
        seed=seed,
        backend=backend_name,
        architecture=workload.architecture,
        checkpoint_every=10**9 if checkpoint_dir is not None else 0,  # only the final checkpoint
        checkpoint_dir=checkpoint_dir,
    )


def _train_pilot(workload: Workload, backend: Any, spec: Any, schedule: list[RunShape], progress: bool) -> Any:
    """The pilot's training: one iteration per shape of ``schedule``."""
    from serverless.trainer import train

    ctl = SweepController(schedule)
    return train(spec, backend=backend, controller=ctl, probe_noise_every=noise_probe_every(workload, 1), progress=progress)


@dataclass(frozen=True)
class ProbeOutcome:
    """The memory probe as the pilot ran it: its result, its measured wall time, the sizes
    the plan may use, and how much pilot time (Lambda clock) it ran beside."""

    probe: dict[str, Any]
    wall_s: float
    sizes: list[int]  # the sizes the plan may use: the sweep, or one vCPU (+ the baseline's) when cut
    beside_s: float
    cut: bool = False


def _emulator(backend: Any) -> bool:
    """Whether ``backend`` is the local Lambda emulator, whose one pool of instances a new
    memory size makes cold. On AWS every probed size is its own alias (Lambda Power Tuning's
    way), so the probe leaves the pilot's functions warm; on the emulator the probe gets its
    own pool for the same effect, and training resumes on warm functions."""
    from serverless.backends.local import LocalBackend

    return isinstance(backend, LocalBackend)


def _probe_beside_pilot(
    workload: Workload, backend: Any, spec: Any, pilot: Any, memory_sweep: tuple[int, ...], cost_baseline_mb: int | None,
) -> ProbeOutcome:
    """The memory probe, beside the pilot. For the cost objective (``cost_baseline_mb`` set)
    it waits for the pilot's first iteration, whose rollouts say whether they keep one CPU
    busy (:func:`~optimizers.seraph.memory_probe.cost_probe_sizes`, on the largest one call's
    share, :func:`~serverless.rollout_batch.best_handler_cpu_share`): if so it probes at most
    the baseline's size and runs beside the rest of the pilot; otherwise, and for the other
    objectives, it probes the whole sweep beside the whole pilot."""
    sweep = sorted({*memory_sweep, BASE_MEMORY_MB})
    first = pilot.iterations[0]
    share = first.rollout.get("handler_cpu_share_best")
    cut = None if cost_baseline_mb is None else cost_probe_sizes(share, sweep, cost_baseline_mb)
    hidden = tuple(spec.ppo.hidden)
    t0 = time.perf_counter()
    if cut is None:
        probe = probe_memory_sizes(workload.env_id, sweep, backend, hidden=hidden, seed=spec.seed, architecture=workload.architecture,
                                   env_kwargs=workload.env_kwargs)
        return ProbeOutcome(probe, time.perf_counter() - t0, sweep, pilot.lambda_time_s)
    if cut:
        probe = probe_memory_sizes(workload.env_id, cut, backend, hidden=hidden, seed=spec.seed, architecture=workload.architecture,
                                   env_kwargs=workload.env_kwargs)
    else:
        from serverless.pricing import PriceTable

        probe = no_probe([], "", learner_usd_per_s=PriceTable.load().vm_cost(1.0), modelled=first.lambda_s_label == "modelled")
    probe["skipped_sizes"] = [m for m in sweep if m not in cut and m != BASE_MEMORY_MB]
    probe["skipped_reason"] = (
        f"cost objective, rollouts CPU-bound on one thread (handler CPU up to {share:.0%} of its duration): "
        f"one vCPU ({BASE_MEMORY_MB} MB, measured by the pilot) is the cheapest size"
    )
    beside = max(0.0, pilot.lambda_time_s - float(first.iteration_lambda_s))  # decided after the first iteration
    return ProbeOutcome(probe, time.perf_counter() - t0, sorted({BASE_MEMORY_MB, *cut}), beside, cut=True)


def _learner_timing(workload: Workload, pilot: Any, seed: int) -> dict[str, Any]:
    """Time the learner at every batch the search considers, on the learner's VM; on the
    modelled clock in the learner's idle time while the pilot's functions run
    (:func:`beside_rollouts`), priced for what does not fit."""
    from serverless.ledger import CostLedger
    from serverless.pricing import PriceTable

    modelled = pilot.lambda_time_label == "modelled"
    batches = batches_for(workload)
    # one searched batch: the pilot's own updates time it, and a timing would only add cost
    rows = time_learner_updates(workload, batches, seed=seed, modelled=modelled) if len(batches) > 1 else []
    # the update's speed-up at the thread counts the learner machines offer, at the pilot's batch
    threads = measure_thread_scaling(workload, pilot_batch(workload), seed=seed, modelled=modelled)
    jobs = [*(r["timed_s"] for r in rows), threads.vm_s]
    timed_s = sum(jobs)  # what the timing itself took (one epoch each)
    waits = [view(r).rollout_lambda_s for r in pilot.iterations] if modelled else []
    excess_s = beside_rollouts(jobs, waits)
    ledger = CostLedger(PriceTable.load(None), architecture=workload.architecture)
    ledger.add_learner_time(excess_s)
    return {
        "rows": rows,
        "timed_s": timed_s,
        "beside_rollouts_s": timed_s - excess_s,
        "lambda_time_s": excess_s,
        "cost_usd": ledger.total_usd,
        **threads.scaling.as_dict(),
        "threads_timed_s": threads.vm_s,
        "label": "synthetic batch, one epoch per size (learner_s: times the epochs); time "
        + ("modelled (CPU time, host-speed corrected); placed in the learner's waits for the pilot's "
           "rollouts, it adds (lambda_time_s) and is priced for only what does not fit"
           if modelled else "measured, run after the pilot and priced in full"),
    }


def _learner_rows(timing: dict[str, Any]) -> list[Observation]:
    """The learner timing as profile rows: the update alone at each batch."""
    return [
        Observation(RunShape(1, BASE_MEMORY_MB, r["batch"]), rollout_s=0.0, billed_s=0.0, learner_s=r["learner_s"],
                    iteration_s=r["learner_s"], learner_only=True)
        for r in timing["rows"]
    ]


def _pilot_summary(
    result: Any, probe: dict[str, Any], probe_wall_s: float, timing: dict[str, Any], schedule: list[RunShape], seed: int
) -> PilotSummary:
    """The profile's ``pilot``: the whole profiling bill and the pilot's training alone."""
    return PilotSummary(
        iterations=len(result.iterations),
        env_steps=result.env_steps,
        # the whole profiling bill: memory probe + pilot training + learner timing
        cost_usd=probe["cost_usd"] + result.cost_usd + timing["cost_usd"],
        cost_label=result.ledger.label,
        lambda_time_s=probe["lambda_time_s"] + result.lambda_time_s + timing["lambda_time_s"],
        lambda_time_label=result.lambda_time_label,
        wall_s=probe_wall_s + result.wall_s,
        # the pilot training alone: what the resumed run's checkpointed ledger holds
        training_cost_usd=result.cost_usd,
        training_lambda_time_s=result.lambda_time_s,
        final_mean_return=result.final_mean_return,
        seed=seed,
        schedule=tuple(schedule),
        memory_probe={**probe, "wall_s": probe_wall_s},
        learner_timing=timing,
        cold_init_s=_cold_init_s(result.iterations[0].rollout) if result.iterations else 0.0,
    )


def _cold_init_s(rollout: "RolloutSummary") -> float:
    """The mean INIT, in seconds, of an iteration's cold functions (0 without any)."""
    cold = int(rollout.get("cold_starts", 0))
    return float(rollout.get("init_ms_total", 0.0)) / 1000.0 / cold if cold else 0.0


def run_pilot(
    workload: Workload,
    backend_name: str,
    *,
    seed: int = 0,
    plan: PilotPlan = PilotPlan(),
    backend: Any = None,
    checkpoint_dir: Path | None = None,
    progress: bool = False,
    backend_options: dict[str, Any] | None = None,
) -> Profile:
    """Run the pilot, probe the memory sizes beside it, time the learner, and build a profile
    from all three. ``plan``: the sizes to probe, the functions the pilot visits
    (:meth:`PilotPlan.schedule`) and, for the cost objective, the baseline's memory size at
    which the probe may stop (:func:`_probe_beside_pilot`). Without a ``backend``, one named
    ``backend_name`` is built with ``backend_options``."""
    from serverless.backends import make_backend

    memory_sweep = plan.memory_sweep
    schedule = plan.schedule(workload)
    spec = _pilot_spec(workload, backend_name, schedule, seed, checkpoint_dir)
    own_backend = backend is None
    if own_backend:
        backend = make_backend(backend_name, **(backend_options or {}))
    prober = make_backend(backend_name, **(backend_options or {})) if _emulator(backend) else backend
    try:
        result = _train_pilot(workload, backend, spec, schedule, progress)
        probed = _probe_beside_pilot(workload, prober, spec, result, memory_sweep, plan.cost_stop_mb)
    finally:
        if prober is not backend:
            prober.close()
        if own_backend:
            backend.close()
    # on the modelled clock the probe ran beside the pilot: the learner waits only for its excess
    probe = {**charge_learner_wait(probed.probe, beside_s=probed.beside_s), "requested_sweep": list(memory_sweep)}
    timing = _learner_timing(workload, result, seed)
    observations = [*probe.pop("observations"), *(observation(r) for r in result.iterations), *_learner_rows(timing)]
    return Profile(
        workload=workload.key_dict(),
        backend=backend_name,
        hardware=hardware_fingerprint(),
        observations=observations,
        noise=_noise_from_records(result.iterations),
        pilot=_pilot_summary(result, probe, probed.wall_s, timing, schedule, seed),
        memory_sweep=probed.sizes if probed.cut else list(memory_sweep),
    )


def profile_workload(
    workload: Workload,
    backend: str = "local",
    *,
    reuse: bool = True,
    seed: int = 0,
    plan: PilotPlan = PilotPlan(),
    checkpoint_dir: Path | None = None,
    backend_obj: Any = None,
    progress: bool = False,
    cache_root: Path | None = None,
    backend_options: dict[str, Any] | None = None,
) -> PilotOutcome:
    """The cached profile for this workload/backend/machine if it serves ``plan``
    (:func:`serves`), or a fresh pilot's (``plan`` and ``backend_options``: see :func:`run_pilot`)."""
    t0 = time.perf_counter()
    if reuse:
        cached = load_profile(workload.key_dict(), backend, cache_root)
        if cached is not None and serves(cached, plan, workload):
            return PilotOutcome(cached, reused=True, wall_s=time.perf_counter() - t0)
    prof = run_pilot(
        workload, backend, seed=seed, plan=plan, backend=backend_obj,
        checkpoint_dir=checkpoint_dir, progress=progress, backend_options=backend_options,
    )
    save_profile(prof, cache_root)
    return PilotOutcome(prof, reused=False, checkpoint_dir=checkpoint_dir, wall_s=time.perf_counter() - t0)


def serves(cached: Profile, plan: PilotPlan, workload: "Workload") -> bool:
    """Whether a cached profile serves ``plan``: made for its memory sweep (if the probe
    stopped at one vCPU for the cost objective, only a cost-objective plan whose baseline size
    it covers), and its pilot visited as many functions as ``plan``'s would (a cost pilot's
    narrower schedule does not serve a speed plan)."""
    requested = cached.pilot.requested_sweep or cached.memory_sweep
    if list(requested) != list(plan.memory_sweep):
        return False
    wanted_top = max(s.actors for s in plan.schedule(workload))
    if cached.pilot.schedule and max(s.actors for s in cached.pilot.schedule) < wanted_top:
        return False
    if cached.memory_sweep == list(plan.memory_sweep):
        return True
    return plan.cost_stop_mb is not None and plan.cost_stop_mb in cached.memory_sweep


def workload_for(
    env_id: str, max_steps: int | None, architecture: str = "x86_64", steps_per_env: int = DEFAULT_STEPS_PER_ENV,
    batches: tuple[int, ...] = (), env_kwargs: dict[str, Any] | None = None, preset: "Preset | None" = None,
) -> Workload:
    """The workload the trainer's preset defines for ``env_id`` (PPO settings included).

    The default step cap is three times the preset's, so a batch larger than the
    preset's (fewer updates per sample) still has room to reach the target.
    ``steps_per_env`` > 0 splits every batch into env slots (``PPOConfig.steps_per_env``;
    default :data:`DEFAULT_STEPS_PER_ENV`), 0 gives one env per function. ``batches``
    narrows the search to those batches (at the baseline's layout, its own).
    ``env_kwargs`` go to ``gymnasium.make`` and into the profile's key. ``preset``: the
    env's (:func:`serverless.presets.preset_for`), looked up already (else looked up here).
    """
    from serverless.presets import preset_for

    preset = preset_for(env_id) if preset is None else preset
    steps = max_steps if max_steps is not None else 3 * preset.max_steps
    ppo = replace(preset.ppo, steps_per_env=steps_per_env).to_dict()
    return Workload(env_id=env_id, max_steps=int(steps), ppo=ppo, architecture=architecture, batches=tuple(batches),
                    env_kwargs=dict(env_kwargs or {}))
