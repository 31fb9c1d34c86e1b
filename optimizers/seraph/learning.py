"""One run of a job, decided from and recorded into the job's history.

``rl tune``, ``rl sweep`` and the ``seraph`` flow call :func:`run_job`: it reads the job's
history (:mod:`optimizers.seraph.history`), asks the bandit for the run's arm
(:mod:`optimizers.seraph.arms`), trains it (the tuner's own run through
:func:`optimizers.seraph.steps.tune_and_train`, or a fixed arm through the trainer, raced
when it is explored), and records the outcome for the next run.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, Iterable

from optimizers.seraph.arms import SERAPH, ArmChoice, BanditSettings, RaceGuard, baseline_arm, choose_arm
from optimizers.seraph.history import History, JobKey, Phase, RunRecord, curve_of
from optimizers.seraph.job import SeraphJob
from serverless.run_shape import RunShape


def job_key(job: SeraphJob) -> JobKey:
    """The history key of ``job``: env, kwargs, env source, target, PPO settings, step cap."""
    w = job.workload
    return JobKey.of(w.env_id, dict(w.env_kwargs), job.request.target_reward, dict(w.ppo), w.max_steps)


def history_of(job: SeraphJob) -> History:
    return History(job_key(job))


def decide(job: SeraphJob, history: History, settings: BanditSettings = BanditSettings(),
           pending: Iterable[str] = ()) -> ArmChoice:
    """The arm of ``job``'s next run, from its history."""
    r = job.request
    return choose_arm(history.runs(), r.objective, r.weight, job.baseline, settings, pending)


@dataclass(frozen=True)
class RunOutcome:
    """A run's arm, its result JSON and the record it added to the history."""

    choice: ArmChoice
    result: dict[str, Any]
    record: RunRecord | None  # None: nothing trained (an infeasible plan)
    history_file: Path | None
    tuned: Any = None  # the tuner's own run: its SeraphResult (the CLI prints the plan from it)
    learner: Any = None  # the run's learner machine (optimizers.seraph.learner_choice.LearnerChoice)


def run_job(
    job: SeraphJob, choice: ArmChoice, history: History, *, source: str, reprofile: bool = False,
    png_path: Path | str | None = None, progress: bool = False, backend_obj: Any = None,
    settings: BanditSettings = BanditSettings(),
) -> RunOutcome:
    """Train ``job`` at ``choice``'s arm and record the run in ``history``."""
    tuned = learner = None
    if choice.arm is None:
        tuned, record = _tuner_run(job, history.key, source, reprofile, png_path, progress, backend_obj)
        result, learner = tuned.to_dict(), tuned.planned.learner
    else:
        result, record, learner = _arm_run(job, choice, history, source, progress, backend_obj, settings)
    result["history"] = {"job": history.key.describe(), "job_id": history.key.id, "choice": choice.to_dict(),
                         "ignored_files": list(history.skipped)}
    path = history.record(record) if record is not None else None
    if path is not None:
        result["history"]["recorded"] = str(path)
    return RunOutcome(choice, result, record, path, tuned, learner)


def _tuner_run(job: SeraphJob, key: JobKey, source: str, reprofile: bool, png_path: Path | str | None,
               progress: bool, backend_obj: Any) -> tuple[Any, RunRecord | None]:
    from optimizers.seraph.steps import tune_and_train

    res = tune_and_train(job, reprofile=reprofile, png_path=png_path, progress=progress, backend_obj=backend_obj)
    return res, tuned_record(job, key, res, source)


def tuned_record(job: SeraphJob, key: JobKey, res: Any, source: str) -> RunRecord | None:
    """The history record of the tuner's own run (a SeraphResult); None when nothing trained."""
    if res.run is None or res.planned.shape is None:
        return None
    a, plan, training = res.run.achieved, res.planned.plan, res.run.training
    first = Phase(replace(plan.shape, steps_per_env=int(plan.steps_per_env or 0)))
    return RunRecord(
        key=key, seed=job.request.seed, arm=SERAPH, objective=job.request.objective, source=source,
        phases=_phases(first, training.config_changes), reached=a.reached, env_steps=a.env_steps,
        lambda_time_s=a.lambda_time_s, cost_usd=a.cost_usd, wall_s=a.wall_s, cost_label=a.cost_label,
        curve=curve_of(training.curve),
    )


def record_tuned_run(job: SeraphJob, res: Any, source: str) -> Path | None:
    """Record the tuner's own run, trained outside :func:`run_job` (the flow's tasks), in its job's history."""
    history = history_of(job)
    record = tuned_record(job, history.key, res, source)
    return None if record is None else history.record(record)


def _phases(first: Phase, changes: list[Any]) -> tuple[Phase, ...]:
    """The run's configurations: ``first``, then each change the trainer recorded."""
    phases = [first]
    for change in changes:
        to, last = change["to"], phases[-1]
        phases.append(Phase(RunShape.from_dict({"steps_per_env": last.shape.steps_per_env, **to}),
                            int(change["env_steps"])))
    return tuple(phases)


def _arm_run(job: SeraphJob, choice: ArmChoice, history: History, source: str, progress: bool, backend_obj: Any,
             settings: BanditSettings) -> tuple[dict[str, Any], RunRecord, Any]:
    """Train at the arm's fixed configuration; an explored arm is raced against the reference runs."""
    from serverless.trainer import train

    arm = choice.arm
    assert arm is not None
    fallback = job.baseline  # the baseline at its own layout
    guard = None
    if choice.explore:
        guard = RaceGuard([r for r in history.runs() if r.arm == SERAPH], job.request.objective,
                          job.request.target_reward, fallback, settings)
    learner = _learner_for_arm(job, arm)
    t0 = time.perf_counter()
    res = train(_arm_spec(job, arm, learner.machine if learner.changed else None), backend=backend_obj,
                controller=guard, progress=progress)
    wall = time.perf_counter() - t0
    record = trained_record(history.key, job.request.seed, arm.name, job.request.objective, source, arm.phase(),
                            res, wall)
    achieved = {
        "reached": res.reached, "env_steps": res.env_steps, "wall_s": wall, "wall_s_label": "measured",
        "lambda_time_s": res.lambda_time_s, "lambda_time_label": res.lambda_time_label, "cost_usd": res.cost_usd,
        "cost_label": res.ledger.label, "includes_pilot": False, "final_mean_return": res.final_mean_return,
        "stop_reason": res.stop_reason,
    }
    out = {
        "label": res.ledger.label, "workload": job.summary(),
        "plan": {"arm": arm.name, "config": arm.phase().to_dict(), "reason": choice.reason,
                 "race": [] if guard is None else guard.decisions, "learner": learner.to_dict()},
        "achieved": achieved,
        "training": {"curve": res.curve, "config_changes": res.config_changes, "ledger": res.ledger.to_dict(),
                     "notes": res.notes},
    }
    return out, record, learner


def _learner_for_arm(job: SeraphJob, arm: Any) -> Any:
    """The learner's machine at the arm's shape, from the models of the job's cached profile;
    without one (a history shared from another machine), the reference machine: an arm run
    never starts a pilot."""
    from optimizers.seraph.learner_choice import keep_reference
    from optimizers.seraph.pilot import PilotOutcome
    from optimizers.seraph.steps import learner_for, make_planner
    from optimizers.seraph.workload_profile import load_profile

    cached = load_profile(job.workload.key_dict(), job.request.backend)
    if cached is None:
        return keep_reference("no cached profile of this workload on this machine to model the learner's share")
    planner = make_planner(PilotOutcome(cached, reused=True), job)
    return learner_for(planner, arm.shape.without_layout(), job)


def _arm_spec(job: SeraphJob, arm: Any, learner: Any = None) -> Any:
    """The trainer's spec for a fixed arm: the job's env, PPO settings and cap at the arm's
    shape, on ``learner`` (None: the price table's learner VM)."""
    from serverless.ppo import PPOConfig
    from serverless.trainer import TrainSpec

    w, r = job.workload, job.request
    ppo = replace(PPOConfig.from_dict(dict(w.ppo)), steps_per_env=arm.shape.steps_per_env, anneal_steps=w.max_steps)
    return TrainSpec(
        env_id=w.env_id, env_kwargs=dict(w.env_kwargs), target_reward=r.target_reward, max_steps=w.max_steps,
        run=arm.shape.without_layout(), ppo=ppo, seed=r.seed,
        backend=r.backend, backend_options=dict(r.backend_options), architecture=w.architecture,
        checkpoint_every=0, faults=job.faults, learner=learner,
    )


def trained_record(key: JobKey, seed: int, arm: str, objective: str, source: str, first: Phase, res: Any,
                   wall_s: float) -> RunRecord:
    """The history record of a trainer run (a TrainResult) that started at ``first``."""
    return RunRecord(
        key=key, seed=seed, arm=arm, objective=objective, source=source, phases=_phases(first, res.config_changes),
        reached=res.reached, env_steps=res.env_steps, lambda_time_s=res.lambda_time_s, cost_usd=res.cost_usd,
        wall_s=wall_s, cost_label=res.ledger.label, curve=curve_of(res.curve),
    )


def record_training(spec: Any, res: Any, source: str, objective: str = "cost") -> Path:
    """Record an ``rl train`` run (a fixed configuration) in its job's history: the arm
    ``baseline`` when it ran the static default, else ``fixed``."""
    from optimizers.seraph.arms import BASELINE
    from optimizers.seraph.baseline import STATIC_DEFAULT_CONFIG

    run = spec.run
    layout = run.steps_per_env if run.steps_per_env is not None else int(spec.ppo.steps_per_env or 0)
    first = Phase(replace(run, steps_per_env=layout or run.batch // run.actors))
    arm = BASELINE if first == baseline_arm(STATIC_DEFAULT_CONFIG).phase() else "fixed"
    history = History(JobKey.of(spec.env_id, dict(spec.env_kwargs), spec.target_reward,
                                {**spec.ppo.to_dict(), "steps_per_env": 0}, spec.max_steps))
    return history.record(trained_record(history.key, spec.seed, arm, objective, source, first, res, res.wall_s))
