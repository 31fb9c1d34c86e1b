"""Seraph's bill: what tuning cost, predicted vs measured per phase, and what a run achieved.

A fresh profile's pilot is real training (the run resumes from its checkpoint), so its
training counts toward the run, while the memory probe, the learner timing and planning
are tuning overhead. All time and cost figures on the local backend are the modelled
Lambda clock and the price table (labelled so); ``wall_s`` figures are measured.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from optimizers.seraph.models import Observation
from optimizers.seraph.planner import Plan, Planner
from optimizers.seraph.pilot import PilotOutcome
from optimizers.seraph.records import view

LABEL = "modelled (local Lambda emulator clock and price table)"


def _new_phase(index: int, r: Any) -> dict[str, Any]:
    return {
        "phase": index,
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
            phases.append(_new_phase(len(phases), r))
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


def profiling_phase(pilot: dict[str, Any]) -> dict[str, Any]:
    """The memory probe and the pilot's own iterations as phase "profiling" of a resumed run."""
    return {
        "phase": "profiling",
        "config": "memory probe + pilot sweep (see profile.pilot.memory_probe and .schedule)",
        "iterations": pilot["iterations"],
        "env_steps": pilot["env_steps"],
        "predicted_time_s": None,
        "measured_time_s": pilot["lambda_time_s"],
        "predicted_cost_usd": None,
        "measured_cost_usd": pilot["cost_usd"],
        "measured_wall_s": pilot["wall_s"],
        "label": LABEL,
    }


def _pilot_iterations(observations: list[Observation]) -> list[Observation]:
    return [o for o in observations if not o.rollout_only and not o.learner_only]


def _fresh_pilot_bill(pilot: PilotOutcome, plan: Plan) -> dict[str, Any]:
    """A fresh pilot's part of the tuning bill, and the part of it that is training."""
    p = pilot.profile.pilot
    training_usd = float(p["training_cost_usd"])
    best = plan.outcome.best
    per_step = 0.0 if best is None else best.cost_usd / max(best.env_steps, 1.0)
    # Every run pays one cold start; after a fresh pilot the run starts warm, so the
    # pilot's cold start is the run's own, not tuning (measured: the pilot's first,
    # cold iteration less its second, the same shape warm).
    first, second = _pilot_iterations(pilot.profile.observations)[:2]
    cold_start_usd = max(0.0, first.iteration_s - second.iteration_s) * plan.prices.learner_usd_per_s
    return {
        "profiling_cost_usd": float(p["cost_usd"]),
        "cold_start_credit_usd": cold_start_usd,
        "profiling_lambda_time_s": float(p["lambda_time_s"]),
        "probe_cost_usd": float(p["memory_probe"]["cost_usd"]),
        "pilot_training_cost_usd": training_usd,
        "pilot_training_value_usd": min(training_usd, int(p["env_steps"]) * per_step + cold_start_usd),
    }


def tuning_overhead(
    pilot: PilotOutcome, plan: Plan, planning_wall_s: float, planning_cpu_s: float
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
        "profiling_wall_s": pilot.wall_s, "planning_wall_s": planning_wall_s, "planning_cpu_s": planning_cpu_s,
        "planning_cost_usd": planning_usd,
    }
    if not pilot.reused:
        out |= _fresh_pilot_bill(pilot, plan)
    out["gross_cost_usd"] = out["profiling_cost_usd"] + planning_usd
    out["net_cost_usd"] = out["gross_cost_usd"] - out["pilot_training_value_usd"]
    out["label"] = "profiling cost and time modelled (probe and pilot ledgers); wall times measured"
    out["note"] = (
        "the pilot is real training: the run resumes from its checkpoint, so its steps count toward the target; "
        "net = gross less what the pilot's env steps would cost at the planned shape and less the run's own cold start"
    )
    return out


def achieved(res: Any, pilot: dict[str, Any], resumed: bool, overhead: dict[str, Any], fresh: bool = False) -> dict[str, Any]:
    """What the run achieved, charged the whole tuning bill.

    Time and cost are the run's ledger (which, after a fresh profile, holds the pilot's
    training: the run resumes from it) plus the rest of the profiling bill (the memory
    probe and the learner timing, not trained on) plus planning (learner-VM CPU time, as
    ``overhead`` prices it): a fresh run is charged everything tuning spent, a cached one
    its planning. ``fresh`` without ``resumed`` (a baseline kept at another layout than the
    pilot's trains from scratch) is charged the whole profiling bill on top of its run.
    """
    charged = resumed or fresh
    untrained_cost = float(pilot["cost_usd"]) - (float(pilot["training_cost_usd"]) if resumed else 0.0) if charged else 0.0
    untrained_time = float(pilot["lambda_time_s"]) - (float(pilot["training_lambda_time_s"]) if resumed else 0.0) if charged else 0.0
    planning_cpu_s, planning_cost = float(overhead["planning_cpu_s"]), float(overhead["planning_cost_usd"])
    return {
        "reached": res.reached,
        "env_steps": res.env_steps,
        "wall_s": res.wall_s,
        "wall_s_label": "measured (this machine, training after profiling; pilot wall in tuning_overhead)",
        "lambda_time_s": res.lambda_time_s + untrained_time + planning_cpu_s,
        "lambda_time_label": res.lambda_time_label,
        "cost_usd": res.cost_usd + untrained_cost + planning_cost,
        "cost_label": res.ledger.label,
        # time and cost include the whole profiling (memory probe, pilot, learner timing)
        "includes_pilot": charged,
        "includes_planning": {"cpu_s": planning_cpu_s, "cost_usd": planning_cost, "label": "measured CPU time, priced as learner VM"},
        "final_mean_return": res.final_mean_return,
        "stop_reason": res.stop_reason,
    }


def training_summary(res: Any, b_noise_final: float | None) -> dict[str, Any]:
    """The run's curve, shape changes, ledger and notes."""
    return {
        "curve": res.curve,
        "config_changes": res.config_changes,
        "ledger": res.ledger.to_dict(),
        "notes": res.notes,
        "b_noise_final": b_noise_final,
        # the controller's observe and re-plan work between iterations (in the run's time and cost)
        "controller_s": res.controller_s,
        # faults met and recovered from (docs/faults.md); the rollout counters say none was lost or reused
        "faults": res.faults,
        "lost_rollouts": res.lost_rollouts,
        "duplicate_rollouts": res.duplicate_rollouts,
    }
