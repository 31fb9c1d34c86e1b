"""Seraph's steps: profile, plan, train; and ``tune_and_train``, which composes them.

* :func:`profile` (request) -> :class:`~optimizers.seraph.pilot.PilotOutcome`: the
  workload's profile, from the cache or from a fresh pilot run (real training, with a
  checkpoint when a run directory is given);
* :func:`plan` (profile, request) -> :class:`~optimizers.seraph.result.SeraphPlan`: the
  shape to start training at, with predicted figures and the Pareto front;
* :func:`train` (plan) -> :class:`~optimizers.seraph.result.SeraphResult`: training from
  exactly that shape to the target, re-planning as it goes (resuming from the pilot's
  checkpoint when this run ran the pilot).

The CLI (``trainwise rl tune``) calls :func:`tune_and_train`; the ``seraph`` Prefect flow
runs the three steps as tasks. Nothing profiles or plans twice.
"""

from __future__ import annotations

import copy
import math
import time
from dataclasses import replace
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Iterator

from optimizers.seraph.baseline import BaselineConfig
from optimizers.seraph.accounting import achieved, phases_from_records, profiling_phase, training_summary, tuning_overhead
from optimizers.seraph.controller import SeraphController
from optimizers.seraph.models import Prices, RunShape
from optimizers.seraph.objectives import Objective
from optimizers.seraph.planner import Planner
from optimizers.seraph.pilot import PilotOutcome, Workload, batches_for, noise_probe_every, profile_workload
from optimizers.seraph.reference_points import reference_for
from optimizers.seraph.request import SeraphRequest
from optimizers.seraph.result import SeraphPlan, SeraphResult
from optimizers.seraph.layout import LayoutChoice
from optimizers.seraph.search import Constraints
from optimizers.seraph.space import DEFAULT_ACTOR_COUNTS, DEFAULT_MEMORY_SWEEP, SearchSpace


def search_space_for(workload: Workload, memories: tuple[int, ...], min_actors: int = 1) -> SearchSpace:
    """The workload's search space. With env slots a function runs at least one slot: more
    functions than ``batch // steps_per_env`` would change the slots, and so what is learned.
    ``min_actors``: the fewest functions the pilot visited; the search does not extrapolate
    below them (:func:`optimizers.seraph.pilot.pilot_schedule`)."""
    actors = tuple(a for a in DEFAULT_ACTOR_COUNTS if a >= min_actors) or (min_actors,)
    return SearchSpace(actors=actors, memories=memories, batches=batches_for(workload),
                       min_steps_per_actor=max(32, workload.steps_per_env))


def pilot_min_actors(profile: Any) -> int:
    """The fewest functions a profile's pilot visited (1 for a profile without a schedule)."""
    return min((int(s["actors"]) for s in profile.pilot.get("schedule", [])), default=1)


def prices_for(architecture: str, price_table: Path | None = None) -> Prices:
    from serverless.pricing import PriceTable

    pt = PriceTable.load(price_table)
    return Prices(
        gb_second_usd=pt.gb_second_price(architecture),
        request_usd=pt.request_usd,
        learner_usd_per_s=pt.vm_usd_per_hour / 3600.0,
        learner_billing="wall",  # the trainer prices the learner VM for the whole iteration
        source=f"serverless/data/prices.json v{pt.version} ({architecture}, {pt.vm_instance_type} learner)",
    )


def episode_time_limit(env_id: str) -> int:
    """The env's registered episode step limit (1,000 when it has none)."""
    import gymnasium as gym

    try:
        limit = gym.spec(env_id).max_episode_steps
    except Exception:  # an unregistered id was rejected earlier; be safe
        limit = None
    return int(limit) if limit else 1000


def make_planner(
    pilot: PilotOutcome,
    workload: Workload,
    objective: Objective,
    constraints: Constraints,
    *,
    target_reward: float | None,
    price_table: Path | None = None,
    baseline: BaselineConfig | None = None,
    layout: LayoutChoice | None = None,
) -> Planner:
    """A planner fitted to ``pilot``'s profile (its models; no plan made yet); ``baseline``
    is always a candidate, scored at its layout (``layout`` holds its reference runs)."""
    from serverless.presets import preset_for

    space = search_space_for(workload, tuple(pilot.profile.memory_sweep), pilot_min_actors(pilot.profile))
    ref = reference_for(workload.env_id, workload.max_steps, preset_for(workload.env_id).batch, workload.steps_per_env)
    return Planner(
        episode_steps=episode_time_limit(workload.env_id),
        profile=pilot.profile,
        objective=objective,
        constraints=constraints,
        prices=prices_for(workload.architecture, price_table),
        reference=ref,
        space=space,
        target_reward=target_reward,
        baseline=baseline,
        baseline_env_steps=None if layout is None else layout.baseline_env_steps,
        layout=None if layout is None else layout.as_dict(),
    )


def planner_for(pilot: PilotOutcome, request: SeraphRequest) -> Planner:
    return make_planner(
        pilot, request.workload(), request.objective_obj(), request.constraints(), target_reward=request.target_reward,
        baseline=request.baseline_config, layout=request.layout(),
    )


# ------------------------------------------------------------------------------ the steps
def profile(
    request: SeraphRequest,
    *,
    reuse: bool = True,
    checkpoint_dir: Path | None = None,
    backend_obj: Any = None,
    progress: bool = False,
) -> PilotOutcome:
    """The request's workload profile: cached (``reuse``), else from a fresh pilot whose
    final checkpoint goes to ``checkpoint_dir`` (training then resumes from it)."""
    import serverless.presets  # noqa: F401  (imported before the clocks start: module import
    import serverless.pricing  # noqa: F401   time is not profiling or planning time)

    baseline = request.baseline_config
    sweep = tuple(sorted({*DEFAULT_MEMORY_SWEEP, baseline.memory_mb}))  # the baseline's size is probed
    # at the baseline's layout the pilot starts as the baseline runs, and does not go below its count
    min_actors = baseline.actors if request.layout().at_baseline else 1
    return profile_workload(
        request.workload(), request.backend, reuse=reuse, seed=request.seed, checkpoint_dir=checkpoint_dir,
        backend_obj=backend_obj, progress=progress, memory_sweep=sweep, min_actors=min_actors,
        # the cost objective without a deadline may stop the memory probe at one vCPU
        cost_baseline_mb=baseline.memory_mb if request.objective == "cost" and request.deadline_s is None else None,
    )


def plan(pilot: PilotOutcome, request: SeraphRequest) -> SeraphPlan:
    """Plan the run: score every shape with the models fitted to the profile and pick one
    for the objective under the constraints (all figures modelled). Planning's own wall
    and CPU time are measured: the CPU time runs on the learner VM and is priced as such."""
    t_wall, t_cpu = time.perf_counter(), time.thread_time()
    planner = planner_for(pilot, request)
    chosen = planner.plan()
    planning_wall_s, planning_cpu_s = time.perf_counter() - t_wall, time.thread_time() - t_cpu
    overhead = tuning_overhead(pilot, chosen, planning_wall_s, planning_cpu_s)
    return SeraphPlan(request=request, pilot=pilot, plan=chosen, planner=planner, overhead=overhead)


def _controller(planner: Planner, planned: SeraphPlan, to_run: Any) -> SeraphController | None:
    """The re-tuning controller, its noise tracker seeded with the pilot's probes."""
    from optimizers.seraph.noise_scale import NoiseSample

    if not planned.request.retune or not _at_pilot_layout(planned):
        return None  # a baseline kept at another layout runs as configured
    assert planned.shape is not None
    for h in planned.pilot.profile.noise.get("history", []):
        planner.tracker.update(NoiseSample(h["g2"], h["trace"]), env_steps=int(h["env_steps"]))
    return SeraphController(
        planner, planned.shape, objective_key=planner.objective_value, make_run_config=to_run,
        every=planned.request.replan_every,
    )


def _at_pilot_layout(planned: SeraphPlan) -> bool:
    """Whether the plan trains at the layout the profile (and its pilot) used."""
    return planned.plan.steps_per_env == planned.request.workload().steps_per_env


def _train_spec(planned: SeraphPlan, run: Any) -> Any:
    """The trainer's spec: start at ``run`` (the plan's shape) at the plan's layout; after
    this run's own pilot at that layout, resume from its checkpoint at that shape rather than
    the pilot's last one (a baseline kept at another layout trains from scratch).

    The request's injected faults meet the training (the trainer wraps whichever backend it
    is given), not the profile: a profile is cached per workload and shared by runs with
    other fault specs, or none."""
    from serverless.backends.faults import FaultSpec
    from serverless.ppo import PPOConfig
    from serverless.trainer import TrainSpec

    request, workload = planned.request, planned.request.workload()
    ckpt = planned.pilot.checkpoint_dir if _at_pilot_layout(planned) else None
    ppo = PPOConfig.from_dict(dict(workload.ppo))
    ppo.steps_per_env = int(planned.plan.steps_per_env or 0)
    ppo.anneal_steps = workload.max_steps
    return TrainSpec(
        env_id=workload.env_id,
        target_reward=request.target_reward,
        max_steps=workload.max_steps,
        run=run,
        ppo=ppo,
        seed=request.seed,
        backend=request.backend,
        architecture=workload.architecture,
        checkpoint_every=0,
        checkpoint_dir=ckpt,
        resume=ckpt is not None,
        resume_run=run if ckpt is not None else None,
        faults=None if request.faults is None else FaultSpec.parse(request.faults),
    )


def train(planned: SeraphPlan, *, backend_obj: Any = None, progress: bool = False) -> SeraphResult:
    """Train from the plan's shape to the target, re-planning every few iterations; the
    result charges the whole tuning bill (see :func:`optimizers.seraph.accounting.achieved`)."""
    from serverless.trainer import RunConfig
    from serverless.trainer import train as run_trainer

    if planned.shape is None:
        raise ValueError(f"the plan has no shape to train: {planned.message}")

    def to_run(s: RunShape) -> RunConfig:
        return RunConfig(actors=s.actors, memory_mb=s.memory_mb, batch=s.batch)

    planner = copy.deepcopy(planned.planner)  # the plan's own models; a retried run starts from them afresh
    controller = _controller(planner, planned, to_run)
    spec = _train_spec(planned, to_run(planned.shape))
    res = run_trainer(
        spec, backend=backend_obj, controller=controller,
        probe_noise_every=0 if controller is None else noise_probe_every(planned.request.workload(), 2), progress=progress,
    )
    if not math.isfinite(res.cost_usd):
        raise RuntimeError("the ledger returned a non-finite cost")
    pilot, resumed = planned.pilot.profile.pilot, spec.resume
    phases, check = phases_from_records(res.iterations, planner, float(pilot["training_cost_usd"]) if resumed else 0.0)
    if resumed:
        phases.insert(0, profiling_phase(pilot))
    check = {**check, "env_steps_to_target": _steps_check(planned, res)}
    return SeraphResult(
        workload=planned.workload_summary(), plan=planned.to_dict(), profile=planned.profile_summary(),
        tuning_overhead=planned.overhead,
        achieved=achieved(res, pilot, resumed, planned.overhead, fresh=not planned.pilot.reused),
        phases=phases,
        model_check=check,
        decisions=[] if controller is None else [d.as_dict() for d in controller.decisions],
        training=training_summary(res, planner.tracker.value),
    )


def _steps_check(planned: SeraphPlan, res: Any) -> dict[str, Any]:
    """The plan's predicted env steps to the target against the run's (measured, when reached)."""
    predicted = planned.plan.outcome.best.env_steps if planned.plan.outcome.best is not None else None
    measured = res.env_steps if res.reached else None
    error = abs(predicted - measured) / measured if predicted is not None and measured else None
    return {"predicted": predicted, "measured": measured, "relative_error": error,
            "references": planned.to_dict().get("references"), "label": "predicted: modelled; measured: env steps counted"}


# ------------------------------------------------------------------------------ composed
@contextmanager
def _backend(request: SeraphRequest, given: Any, needed: bool) -> Iterator[Any]:
    """One backend for pilot and training (the pilot leaves its functions warm): ``given``,
    else a new one closed at the end, else none when nothing will run."""
    if given is not None or not needed:
        yield given
        return
    from serverless.backends import make_backend

    backend = make_backend(request.backend)
    try:
        yield backend
    finally:
        backend.close()


def tune_and_train(
    request: SeraphRequest,
    *,
    reprofile: bool = False,
    plan_only: bool = False,
    png_path: Path | str | None = None,
    progress: bool = False,
    run_dir: Path | None = None,
    backend_obj: Any = None,
) -> SeraphResult:
    """Profile (or reuse the profile), plan, and unless ``plan_only`` train to the target.

    An infeasible plan is returned untrained (its message says why)."""
    if run_dir is None and not plan_only:
        from core.paths import new_run_dir

        run_dir = new_run_dir("seraph")
    ckpt = None if plan_only else Path(run_dir) / "checkpoint"  # type: ignore[arg-type]
    with _backend(request, backend_obj, needed=not plan_only) as backend:
        pilot = profile(request, reuse=not reprofile, checkpoint_dir=ckpt, backend_obj=backend, progress=progress)
        planned = plan(pilot, request)
        png = _pareto_png(planned, png_path)
        if plan_only or planned.shape is None:
            return SeraphResult.of_plan(planned, png)
        return replace(train(planned, backend_obj=backend, progress=progress), pareto_png=png)


def _pareto_png(planned: SeraphPlan, png_path: Path | str | None) -> str | None:
    if png_path is None:
        return None
    from optimizers.seraph.pareto_plot import render_pareto_png

    return str(render_pareto_png(planned.to_dict(), png_path, all_points=[c.as_dict() for c in planned.plan.candidates]))
