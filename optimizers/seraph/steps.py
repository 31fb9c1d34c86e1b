"""Seraph's steps: profile, plan, train; and ``tune_and_train``, which composes them.

Each step takes the :class:`~optimizers.seraph.job.SeraphJob` built once from the request.

* :func:`profile` (job) -> :class:`~optimizers.seraph.pilot.PilotOutcome`: the
  workload's profile, from the cache or from a fresh pilot run (real training, with a
  checkpoint when a run directory is given);
* :func:`plan` (job, profile) -> :class:`~optimizers.seraph.result.SeraphPlan`: the
  shape to start training at, with predicted figures and the Pareto front;
* :func:`train` (plan) -> :class:`~optimizers.seraph.result.SeraphResult`: training from
  exactly that shape to the target, re-planning as it goes (resuming from the pilot's
  checkpoint when this run ran the pilot).

The CLI (``trainwise rl tune``) calls :func:`tune_and_train`; the ``seraph`` Prefect flow
runs the same three steps as tasks, with the same arguments. Training resumes from the
pilot's checkpoint exactly when this run ran the pilot (a reused profile trains from a
fresh policy). Nothing profiles or plans twice.
"""

from __future__ import annotations

import copy
import math
import time
from dataclasses import replace
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Iterator

from optimizers.seraph.accounting import (
    StepsCheck, achieved, figures_label, phases_from_records, profiling_phase, training_summary, tuning_overhead,
)
from optimizers.seraph.controller import SeraphController
from optimizers.seraph.online_layout import LayoutController, OnlineLayout, OnlineLayoutSettings
from optimizers.seraph.job import SeraphJob
from optimizers.seraph.learner_choice import LearnerChoice, choose_learner
from serverless.run_shape import RunShape
from optimizers.seraph.planner import Planner
from optimizers.seraph.pilot import PilotOutcome, noise_probe_every, profile_workload
from optimizers.seraph.result import SeraphPlan, SeraphResult, TrainedRun
from optimizers.seraph.request import SeraphRequest


def make_planner(pilot: PilotOutcome, job: SeraphJob) -> Planner:
    """A planner fitted to ``pilot``'s profile (its models; no plan made yet); the job's
    baseline is always a candidate, scored at its layout (the layout holds its reference runs)."""
    return Planner(
        episode_steps=job.episode_steps,
        profile=pilot.profile,
        objective=job.objective,
        constraints=job.constraints,
        prices=job.prices,
        reference=job.reference,
        space=job.search_space(pilot.profile),
        target_reward=job.request.target_reward,
        baseline=job.baseline,
        baseline_env_steps=job.layout.baseline_env_steps,
        layout=job.layout,
    )


# ------------------------------------------------------------------------------ the steps
def profile(
    job: SeraphJob,
    *,
    reuse: bool = True,
    checkpoint_dir: Path | None = None,
    backend_obj: Any = None,
    progress: bool = False,
) -> PilotOutcome:
    """The job's workload profile: cached (``reuse``), else from a fresh pilot whose final
    checkpoint goes to ``checkpoint_dir`` (training then resumes from it)."""
    import serverless.presets  # noqa: F401  (imported before the clocks start: module import
    import serverless.pricing  # noqa: F401   time is not profiling or planning time)

    return profile_workload(
        job.workload, job.request.backend, reuse=reuse, seed=job.request.seed, checkpoint_dir=checkpoint_dir,
        backend_obj=backend_obj, progress=progress, plan=job.pilot, backend_options=job.request.backend_options,
    )


def plan(job: SeraphJob, pilot: PilotOutcome) -> SeraphPlan:
    """Plan the run: score every shape with the models fitted to the profile and pick one
    for the objective under the constraints, then the learner's machine for that shape (all
    figures modelled). Planning's own wall and CPU time are measured: the CPU time runs on
    the learner VM and is priced as such."""
    t_wall, t_cpu = time.perf_counter(), time.thread_time()
    planner = make_planner(pilot, job)
    chosen = planner.plan()
    learner = None if chosen.shape is None else learner_for(planner, chosen.shape, job)
    planning_wall_s, planning_cpu_s = time.perf_counter() - t_wall, time.thread_time() - t_cpu
    overhead = tuning_overhead(pilot, chosen, planning_wall_s, planning_cpu_s)
    return SeraphPlan(job=job, pilot=pilot, plan=chosen, planner=planner, overhead=overhead, learner=learner)


def learner_for(planner: Planner, shape: RunShape, job: SeraphJob) -> LearnerChoice:
    """The learner's machine for an iteration at ``shape``, from the planner's models and the
    update's thread speed-ups the pilot measured (:mod:`optimizers.seraph.learner_choice`)."""
    perf = planner.perf
    update_s = perf.learner_s(shape)
    return choose_learner(job.request.objective, job.request.weight, perf.rollout_s(shape),
                          update_s + perf.other_s(shape), update_s=update_s,
                          scaling=planner.profile.pilot.thread_scaling)


def _controller(planner: Planner, planned: SeraphPlan) -> SeraphController | LayoutController | None:
    """The re-tuning controller, its noise tracker seeded with the pilot's probes; at the
    baseline's layout (not fixed by the request) under the online layout decision."""
    from optimizers.seraph.noise_scale import NoiseSample

    if not planned.job.request.retune or not _at_pilot_layout(planned):
        return None  # a baseline kept at another layout runs as configured
    assert planned.shape is not None
    for h in planned.pilot.profile.noise.history:
        planner.tracker.update(NoiseSample(h.g2, h.trace), env_steps=int(h.env_steps))
    inner = SeraphController(
        planner, planned.shape, objective_key=planner.objective_value,
        every=planned.job.request.replan_every,
    )
    layout = planned.job.layout
    if not layout.at_baseline or layout.fixed or not planned.plan.steps_per_env:
        return inner
    return LayoutController(online_layout(planner, planned), planner, inner)


def online_layout(planner: Planner, planned: SeraphPlan) -> OnlineLayout:
    """The online layout decision for a run at the baseline's layout: the break-even from the
    planner's models, the margin its recent (else profile) iteration-time error, every other
    number :class:`OnlineLayoutSettings`' defaults."""
    from optimizers.seraph.search import front_scale

    ppo = planned.job.workload.ppo
    assert planned.shape is not None

    def cost_of(shape: Any) -> tuple[float, float]:
        return planner.cost.iteration_cost(shape), planner.perf.iteration_s(shape)

    def objective(cost: float, time_s: float) -> float:
        return planner.objective.value(cost, time_s, front_scale(planner.last_front))

    def margin() -> float:
        return planner.prediction_error() or planner.perf.fit_error.get("iteration_s_mdape_in_sample") or 0.0

    settings = OnlineLayoutSettings()
    return OnlineLayout(
        steps_per_env=int(planned.plan.steps_per_env or 0), shape=planned.shape,
        floor=settings.step_floor(float(ppo.get("gamma", 0.99)), float(ppo.get("gae_lambda", 0.95))),
        cost_of=cost_of, objective=objective, margin=margin, seed=planned.job.request.seed,
        learner_usd_per_s=planned.job.prices.learner_usd_per_s, settings=settings,
    )


def _at_pilot_layout(planned: SeraphPlan) -> bool:
    """Whether the plan trains at the layout the profile (and its pilot) used."""
    return planned.plan.steps_per_env == planned.job.workload.steps_per_env


def _train_spec(planned: SeraphPlan, run: Any) -> Any:
    """The trainer's spec: start at ``run`` (the plan's shape) at the plan's layout; after
    this run's own pilot at that layout, resume from its checkpoint at that shape rather than
    the pilot's last one (a baseline kept at another layout trains from scratch).

    The request's injected faults meet the training (the trainer wraps whichever backend it
    is given), not the profile: a profile is cached per workload and shared by runs with
    other fault specs, or none."""
    from serverless.ppo import PPOConfig
    from serverless.trainer import TrainSpec

    request, workload = planned.job.request, planned.job.workload
    ckpt = planned.pilot.checkpoint_dir if _at_pilot_layout(planned) else None
    ppo = PPOConfig.from_dict(dict(workload.ppo))
    ppo.steps_per_env = int(planned.plan.steps_per_env or 0)
    ppo.anneal_steps = workload.max_steps
    return TrainSpec(
        env_id=workload.env_id,
        env_kwargs=dict(workload.env_kwargs),
        target_reward=request.target_reward,
        max_steps=workload.max_steps,
        run=run,
        ppo=ppo,
        seed=request.seed,
        backend=request.backend,
        backend_options=dict(request.backend_options),
        architecture=workload.architecture,
        checkpoint_every=0,
        checkpoint_dir=ckpt,
        resume=ckpt is not None,
        resume_run=run if ckpt is not None else None,
        faults=planned.job.faults,
        learner=planned.learner.machine if planned.learner is not None and planned.learner.changed else None,
    )


def train(planned: SeraphPlan, *, backend_obj: Any = None, progress: bool = False) -> SeraphResult:
    """Train from the plan's shape to the target, re-planning every few iterations; the
    result charges the whole tuning bill (see :func:`optimizers.seraph.accounting.achieved`)."""
    from serverless.trainer import train as run_trainer

    if planned.shape is None:
        raise ValueError(f"the plan has no shape to train: {planned.message}")
    planner = copy.deepcopy(planned.planner)  # the plan's own models; a retried run starts from them afresh
    controller = _controller(planner, planned)
    spec = _train_spec(planned, planned.shape.without_layout())
    res = run_trainer(
        spec, backend=backend_obj, controller=controller,
        probe_noise_every=0 if controller is None else noise_probe_every(planned.job.workload, 2), progress=progress,
    )
    if not math.isfinite(res.cost_usd):
        raise RuntimeError("the ledger returned a non-finite cost")
    pilot, resumed = planned.pilot.profile.pilot, spec.resume
    label = figures_label(planned.job.request.backend)
    phases, check = phases_from_records(res.iterations, planner, pilot.training_cost_usd if resumed else 0.0, label)
    run = TrainedRun(
        achieved=achieved(res, pilot, resumed, planned.overhead, fresh=not planned.pilot.reused),
        phases=((profiling_phase(pilot, label),) if resumed else ()) + tuple(phases),
        model_check=replace(check, env_steps_to_target=_steps_check(planned, res)),
        decisions=() if controller is None else tuple(controller.decisions),
        training=training_summary(res, planner.tracker.value),
        layout_decisions=tuple(controller.layout.decisions) if isinstance(controller, LayoutController) else (),
    )
    return SeraphResult(planned, label=label, run=run)


def _steps_check(planned: SeraphPlan, res: Any) -> StepsCheck:
    """The plan's predicted env steps to the target against the run's (measured, when reached)."""
    best = planned.plan.outcome.best
    return StepsCheck(predicted=None if best is None else best.env_steps, measured=res.env_steps if res.reached else None,
                      references=planned.job.layout.references)


# ------------------------------------------------------------------------------ composed
@contextmanager
def _backend(request: SeraphRequest, given: Any, needed: bool) -> Iterator[Any]:
    """One backend for pilot and training (the pilot leaves its functions warm): ``given``,
    else a new one closed at the end, else none when nothing will run."""
    if given is not None or not needed:
        yield given
        return
    backend = request.function_backend()
    try:
        yield backend
    finally:
        backend.close()


def tune_and_train(
    job: SeraphJob,
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
    with _backend(job.request, backend_obj, needed=not plan_only) as backend:
        pilot = profile(job, reuse=not reprofile, checkpoint_dir=ckpt, backend_obj=backend, progress=progress)
        planned = plan(job, pilot)
        png = _pareto_png(planned, png_path)
        if plan_only or planned.shape is None:
            return SeraphResult(planned, label=figures_label(job.request.backend), pareto_png=png)
        return replace(train(planned, backend_obj=backend, progress=progress), pareto_png=png)


def _pareto_png(planned: SeraphPlan, png_path: Path | str | None) -> str | None:
    if png_path is None:
        return None
    from optimizers.seraph.pareto_plot import render_pareto_png

    return str(render_pareto_png(planned.to_dict(), png_path, all_points=[c.as_dict() for c in planned.plan.candidates]))
