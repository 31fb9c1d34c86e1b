"""Seraph end to end: profile (or reuse), plan, train with re-tuning, explain.

``tune_and_train`` returns the dict the CLI writes: ``plan``, ``phases`` (per phase:
the configuration, predicted vs measured time and cost), ``achieved`` and the
controller's ``decisions``. All time and cost figures on the local backend are the
modelled Lambda clock and the price table (labelled so); ``wall_s`` is measured.
"""

from __future__ import annotations

import json
import math
import time
from pathlib import Path
from typing import Any

import numpy as np

from optimizers.seraph.controller import SeraphController
from optimizers.seraph.models import Observation, Prices, RunShape
from optimizers.seraph.planner import Plan, Planner, SearchSpace, reference_for
from optimizers.seraph.profiling import (
    DEFAULT_STEPS_PER_ENV,
    PilotOutcome,
    Workload,
    batches_for,
    profile_workload,
    workload_for,
)
from optimizers.seraph.records import view
from optimizers.seraph.search import Constraints, Objective

LABEL = "modelled (local Lambda emulator clock and price table)"

def search_space_for(workload: Workload, memories: tuple[int, ...]) -> SearchSpace:
    """The workload's search space. With env slots a function runs at least one slot: more
    functions than ``batch // steps_per_env`` would change the slots, and so what is learned."""
    return SearchSpace(memories=memories, batches=batches_for(workload), min_steps_per_actor=max(32, workload.steps_per_env))


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
) -> Planner:
    space = search_space_for(workload, tuple(pilot.profile.memory_sweep))
    from serverless.presets import preset_for

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
    )


def phases_from_records(records: list[Any], planner: Planner, cost_before: float) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    """Group consecutive iterations by shape; predicted vs measured per phase.

    The prediction for an iteration is the one the controller's model made *before*
    it ran (refitted at each re-plan); without a controller, the profile's model.
    The check also reports the profile-only model's error, for comparison.
    """
    phases: list[dict[str, Any]] = []
    errors: list[float] = []
    static_errors: list[float] = []
    per_iteration: list[list[float]] = []
    prev_cost = cost_before
    for rec in records:
        r = view(rec)
        static_t = planner.profile_perf.iteration_s(r.shape)
        online = planner.predictions.get(r.iteration)
        pred_t = online["predicted_s"] if online else static_t
        pred_c = online["predicted_cost_usd"] if online else planner.cost.iteration_cost(r.shape)
        meas_c = r.cost_usd - prev_cost
        prev_cost = r.cost_usd
        if r.iteration_lambda_s > 0:
            errors.append(abs(pred_t - r.iteration_lambda_s) / r.iteration_lambda_s)
            static_errors.append(abs(static_t - r.iteration_lambda_s) / r.iteration_lambda_s)
        per_iteration.append([r.iteration, round(pred_t, 4), round(r.iteration_lambda_s, 4), round(r.learner_s, 4), int(r.cold)])
        if not phases or phases[-1]["config"] != r.shape.as_dict():
            phases.append(
                {
                    "phase": len(phases),
                    "config": r.shape.as_dict(),
                    "first_iteration": r.iteration,
                    "iterations": 0,
                    "env_steps": 0,
                    "predicted_time_s": 0.0,
                    "measured_time_s": 0.0,
                    "predicted_cost_usd": 0.0,
                    "measured_cost_usd": 0.0,
                    "measured_wall_s": 0.0,
                    "label": LABEL + "; measured_wall_s measured locally",
                }
            )
        ph = phases[-1]
        ph["iterations"] += 1
        ph["env_steps"] += r.shape.batch
        ph["predicted_time_s"] += pred_t
        ph["measured_time_s"] += r.iteration_lambda_s
        ph["predicted_cost_usd"] += pred_c
        ph["measured_cost_usd"] += meas_c
        ph["measured_wall_s"] += r.wall_s
    check = {
        "iteration_time_median_abs_error": float(np.median(errors)) if errors else None,
        "iteration_time_median_abs_error_profile_model": float(np.median(static_errors)) if static_errors else None,
        "iterations_checked": len(errors),
        "note": "predicted iteration time (made before the iteration ran) vs the trainer's Lambda-clock iteration time",
        "per_iteration": {"columns": ["iteration", "predicted_s", "measured_s", "learner_s", "cold"], "rows": per_iteration},
    }
    return phases, check


def _point_checkpoint_at(checkpoint_dir: Path, shape: RunShape) -> bool:
    """Make the resumed run start at the planned shape, not the pilot's last one.

    The trainer restores its run shape from the checkpoint's ``trainer.json``; we
    rewrite that one field (our own run directory). If the layout is not what we
    expect, we leave it alone and the controller corrects the shape after one
    iteration instead.
    """
    state_path = checkpoint_dir / "trainer.json"
    try:
        state = json.loads(state_path.read_text())
        if set(state.get("run", {})) != {"actors", "memory_mb", "batch"}:
            return False
        state["run"] = shape.as_dict()
        state_path.write_text(json.dumps(state))
        return True
    except (OSError, ValueError):
        return False


def tune_and_train(
    *,
    env_id: str,
    target_reward: float,
    objective: str = "cost",
    weight: float = 0.5,
    deadline_s: float | None = None,
    budget_usd: float | None = None,
    backend: str = "local",
    architecture: str = "x86_64",
    seed: int = 0,
    max_steps: int | None = None,
    replan_every: int = 3,
    retune: bool = True,
    reprofile: bool = False,
    plan_only: bool = False,
    png_path: Path | str | None = None,
    progress: bool = False,
    run_dir: Path | None = None,
    backend_obj: Any = None,
    steps_per_env: int = DEFAULT_STEPS_PER_ENV,
) -> dict[str, Any]:
    """Profile (or reuse the profile), plan, and unless ``plan_only`` train to the target."""
    obj = Objective(objective, weight)
    cons = Constraints(deadline_s, budget_usd)
    workload = workload_for(env_id, max_steps, architecture, steps_per_env)
    if run_dir is None:
        from core.paths import new_run_dir

        run_dir = new_run_dir("seraph")
    ckpt = None if plan_only else Path(run_dir) / "checkpoint"
    import serverless.presets  # noqa: F401  (imported before the clocks start: module import
    import serverless.pricing  # noqa: F401   time is not planning time)

    own_backend = backend_obj is None and not plan_only
    if own_backend:  # one backend for pilot and training: the pilot leaves its functions warm
        from serverless.backends import make_backend

        backend_obj = make_backend(backend)
    try:
        return _profile_plan_train(
            workload, obj, cons, backend, seed, target_reward, ckpt, reprofile, plan_only, png_path,
            replan_every, retune, progress, backend_obj,
        )
    finally:
        if own_backend:
            backend_obj.close()


def _profile_plan_train(
    workload: Workload,
    obj: Objective,
    cons: Constraints,
    backend: str,
    seed: int,
    target_reward: float,
    ckpt: Path | None,
    reprofile: bool,
    plan_only: bool,
    png_path: Path | str | None,
    replan_every: int,
    retune: bool,
    progress: bool,
    backend_obj: Any,
) -> dict[str, Any]:
    t0 = time.perf_counter()
    pilot = profile_workload(
        workload, backend, reuse=not reprofile, seed=seed, checkpoint_dir=ckpt, backend_obj=backend_obj, progress=progress
    )
    t_profiled, c_profiled = time.perf_counter(), time.thread_time()
    planner = make_planner(pilot, workload, obj, cons, target_reward=target_reward)
    plan: Plan = planner.plan()
    planning_wall_s = time.perf_counter() - t_profiled
    planning_cpu_s = time.thread_time() - c_profiled  # on the learner VM: priced like the learner's CPU time
    plan_d = plan.as_dict()
    result: dict[str, Any] = {
        "label": LABEL,
        "workload": {**workload.key_dict(), "target_reward": target_reward, "seed": seed, "backend": backend},
        "plan": plan_d,
        "profile": {
            "key": pilot.profile.key,
            "reused": pilot.reused,
            "b_noise_pilot": pilot.profile.b_noise,
            "pilot": pilot.profile.pilot,
        },
    }
    if png_path is not None:
        from optimizers.seraph.pareto_plot import render_pareto_png

        result["pareto_png"] = str(
            render_pareto_png(plan_d, png_path, all_points=[c.as_dict() for c in plan.candidates])
        )
    overhead = _tuning_overhead(pilot, plan, t_profiled - t0, planning_wall_s, planning_cpu_s)
    result["tuning_overhead"] = overhead
    if plan_only or plan.shape is None:
        return result
    result["achieved"], result["phases"], result["model_check"], result["decisions"], result["training"] = _train(
        plan, planner, workload, pilot, target_reward, seed, backend, replan_every, retune, progress, backend_obj,
        overhead,
    )
    return result


def _pilot_iterations(profile: Any) -> list[Observation]:
    return [o for o in profile.observations if not o.rollout_only and not o.learner_only]


def _tuning_overhead(
    pilot: PilotOutcome, plan: Plan, profiling_wall_s: float, planning_wall_s: float, planning_cpu_s: float
) -> dict[str, Any]:
    """What tuning cost, gross and net of the training the pilot did.

    Gross: the memory probe plus the pilot run plus planning. Net: what would not have
    been spent without tuning - the probe (not trained on), the pilot's cost beyond
    what its env steps would cost at the planned shape plus the one cold start every run
    pays (the run resumes from the pilot, warm, so those steps are training), and
    planning (learner CPU time while it plans).
    """
    planning_usd = planning_cpu_s * plan.prices.learner_usd_per_s
    out: dict[str, Any] = {
        "profiling_cost_usd": 0.0, "profiling_lambda_time_s": 0.0, "probe_cost_usd": 0.0,
        "pilot_training_cost_usd": 0.0, "pilot_training_value_usd": 0.0,
        "profiling_wall_s": profiling_wall_s, "planning_wall_s": planning_wall_s, "planning_cpu_s": planning_cpu_s,
        "planning_cost_usd": planning_usd,
    }
    if not pilot.reused:
        p = pilot.profile.pilot
        training_usd = float(p["training_cost_usd"])
        best = plan.outcome.best
        per_step = 0.0 if best is None else best.cost_usd / max(best.env_steps, 1.0)
        # Every run pays one cold start; after a fresh pilot the run starts warm, so the
        # pilot's cold start is the run's own, not tuning (measured: the pilot's first,
        # cold iteration less its second, the same shape warm).
        first, second = _pilot_iterations(pilot.profile)[:2]
        cold_start_usd = max(0.0, first.iteration_s - second.iteration_s) * plan.prices.learner_usd_per_s
        out |= {
            "profiling_cost_usd": float(p["cost_usd"]),
            "cold_start_credit_usd": cold_start_usd,
            "profiling_lambda_time_s": float(p["lambda_time_s"]),
            "probe_cost_usd": float(p["memory_probe"]["cost_usd"]),
            "pilot_training_cost_usd": training_usd,
            "pilot_training_value_usd": min(training_usd, int(p["env_steps"]) * per_step + cold_start_usd),
        }
    out["gross_cost_usd"] = out["profiling_cost_usd"] + planning_usd
    out["net_cost_usd"] = out["gross_cost_usd"] - out["pilot_training_value_usd"]
    out["label"] = "profiling cost and time modelled (probe and pilot ledgers); wall times measured"
    out["note"] = (
        "the pilot is real training: the run resumes from its checkpoint, so its steps count toward the target; "
        "net = gross less what the pilot's env steps would cost at the planned shape and less the run's own cold start"
    )
    return out


def _train(
    plan: Plan,
    planner: Planner,
    workload: Workload,
    pilot: PilotOutcome,
    target_reward: float,
    seed: int,
    backend: str,
    replan_every: int,
    retune: bool,
    progress: bool,
    backend_obj: Any,
    overhead: dict[str, Any],
) -> tuple[dict[str, Any], list[dict[str, Any]], dict[str, Any], list[dict[str, Any]], dict[str, Any]]:
    """Train with the plan; what was achieved, including the whole tuning bill.

    ``achieved`` time and cost are the run's ledger (which, after a fresh profile, holds the
    pilot's training: the run resumes from it) plus the rest of the profiling bill (the
    memory probe and the learner timing, not trained on) plus planning (learner-VM CPU
    time, as ``overhead`` prices it), so a fresh run is charged everything tuning spent and a cached one its planning.
    """
    from serverless.ppo import PPOConfig
    from serverless.trainer import RunConfig, TrainSpec, train

    assert plan.shape is not None

    def to_run(s: RunShape) -> RunConfig:
        return RunConfig(actors=s.actors, memory_mb=s.memory_mb, batch=s.batch)

    ppo = PPOConfig.from_dict(dict(workload.ppo))
    ppo.anneal_steps = workload.max_steps
    resume = pilot.checkpoint_dir is not None
    if resume:
        _point_checkpoint_at(pilot.checkpoint_dir, plan.shape)  # type: ignore[arg-type]
    controller = None
    if retune:
        controller = SeraphController(
            planner, plan.shape, objective_key=planner.objective_value, make_run_config=to_run, every=replan_every
        )
        # the pilot's probes seed the live tracker
        for h in pilot.profile.noise.get("history", []):
            from optimizers.seraph.noise_scale import NoiseSample

            planner.tracker.update(NoiseSample(h["g2"], h["trace"]), env_steps=int(h["env_steps"]))
    spec = TrainSpec(
        env_id=workload.env_id,
        target_reward=target_reward,
        max_steps=workload.max_steps,
        run=to_run(plan.shape),
        ppo=ppo,
        seed=seed,
        backend=backend,
        architecture=workload.architecture,
        checkpoint_every=0,
        checkpoint_dir=pilot.checkpoint_dir,
        resume=resume,
    )
    res = train(spec, backend=backend_obj, controller=controller, probe_noise_every=2 if retune else 0, progress=progress)
    p = pilot.profile.pilot
    # With a fresh profile the run resumes from the pilot: its ledger holds the pilot's
    # training; the rest of the profiling bill is added to time and cost here.
    untrained_cost = float(p["cost_usd"]) - float(p["training_cost_usd"]) if resume else 0.0
    untrained_time = float(p["lambda_time_s"]) - float(p["training_lambda_time_s"]) if resume else 0.0
    planning_cpu_s, planning_cost = float(overhead["planning_cpu_s"]), float(overhead["planning_cost_usd"])
    trained_before = float(p["training_cost_usd"]) if resume else 0.0
    phases, check = phases_from_records(res.iterations, planner, trained_before)
    if resume:  # the memory probe and the pilot's own iterations form phase "profiling"
        phases.insert(
            0,
            {
                "phase": "profiling",
                "config": "memory probe + pilot sweep (see profile.pilot.memory_probe and .schedule)",
                "iterations": p["iterations"],
                "env_steps": p["env_steps"],
                "predicted_time_s": None,
                "measured_time_s": p["lambda_time_s"],
                "predicted_cost_usd": None,
                "measured_cost_usd": p["cost_usd"],
                "measured_wall_s": p["wall_s"],
                "label": LABEL,
            },
        )
    achieved = {
        "reached": res.reached,
        "env_steps": res.env_steps,
        "wall_s": res.wall_s,
        "wall_s_label": "measured (this machine, training after profiling; pilot wall in tuning_overhead)",
        "lambda_time_s": res.lambda_time_s + untrained_time + planning_cpu_s,
        "lambda_time_label": res.lambda_time_label,
        "cost_usd": res.cost_usd + untrained_cost + planning_cost,
        "cost_label": res.ledger.label,
        # time and cost include the whole profiling (memory probe, pilot, learner timing)
        "includes_pilot": resume,
        "includes_planning": {"cpu_s": planning_cpu_s, "cost_usd": planning_cost, "label": "measured CPU time, priced as learner VM"},
        "final_mean_return": res.final_mean_return,
        "stop_reason": res.stop_reason,
    }
    decisions = [] if controller is None else [d.as_dict() for d in controller.decisions]
    training = {
        "curve": res.curve,
        "config_changes": res.config_changes,
        "ledger": res.ledger.to_dict(),
        "notes": res.notes,
        "b_noise_final": planner.tracker.value,
        # the controller's observe and re-plan work between iterations (in the run's time and cost)
        "controller_s": res.controller_s,
    }
    if not math.isfinite(res.cost_usd):
        raise RuntimeError("the ledger returned a non-finite cost")
    return achieved, phases, check, decisions, training
