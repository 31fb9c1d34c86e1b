"""Seraph's bill: what tuning cost, predicted vs measured per phase, and what a run achieved.

A fresh profile's pilot is real training (the run resumes from its checkpoint), so its
training counts toward the run, while the memory probe, the learner timing and planning
are tuning overhead. All time and cost figures on the local backend are the modelled
Lambda clock and the price table (labelled so); ``wall_s`` figures are measured.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any

import numpy as np

from core.json_edge import JsonObject
from optimizers.seraph.models import Observation
from serverless.run_shape import RunShape
from optimizers.seraph.planner import Plan, Planner
from optimizers.seraph.pilot import PilotOutcome
from optimizers.seraph.records import view
from optimizers.seraph.workload_profile import PilotSummary
from serverless.run_state import ConfigChange, CurvePoint
from serverless.trainer import FaultsReport

LABEL = "modelled (local Lambda emulator clock and price table)"


def figures_label(backend: str) -> str:
    """How a run on ``backend`` got its time and cost figures: :data:`LABEL` on the
    modelled clock; on a measured one, the backend's clock and billing labels."""
    from serverless.backends import BACKENDS

    entry = BACKENDS.get(backend)
    if entry.clock == "modelled":
        return LABEL
    return (f"{entry.clock} ({entry.clock_name}); cost: {' or '.join(entry.billing)} durations priced with the "
            "price table")


@dataclass(frozen=True)
class Phase:
    """Consecutive iterations at one shape (or the pilot, as phase ``"profiling"``):
    predicted vs measured time and cost."""

    phase: int | str
    config: RunShape | str  # the shape, or what the profiling phase covered
    iterations: int
    env_steps: int
    predicted_time_s: float | None
    measured_time_s: float
    predicted_cost_usd: float | None
    measured_cost_usd: float
    measured_wall_s: float
    label: str
    first_iteration: int | None = None  # None for the profiling phase

    def add(self, *, env_steps: int, predicted_s: float, measured_s: float, predicted_usd: float, measured_usd: float,
            wall_s: float) -> "Phase":
        """This phase with one more iteration."""
        return replace(
            self, iterations=self.iterations + 1, env_steps=self.env_steps + env_steps,
            predicted_time_s=(self.predicted_time_s or 0.0) + predicted_s, measured_time_s=self.measured_time_s + measured_s,
            predicted_cost_usd=(self.predicted_cost_usd or 0.0) + predicted_usd,
            measured_cost_usd=self.measured_cost_usd + measured_usd, measured_wall_s=self.measured_wall_s + wall_s,
        )

    def to_dict(self) -> JsonObject:
        head: JsonObject = {"phase": self.phase, "config": self.config.to_dict() if isinstance(self.config, RunShape) else self.config}
        if self.first_iteration is not None:
            head["first_iteration"] = self.first_iteration
        return head | {
            "iterations": self.iterations, "env_steps": self.env_steps, "predicted_time_s": self.predicted_time_s,
            "measured_time_s": self.measured_time_s, "predicted_cost_usd": self.predicted_cost_usd,
            "measured_cost_usd": self.measured_cost_usd, "measured_wall_s": self.measured_wall_s, "label": self.label,
        }


@dataclass(frozen=True)
class StepsCheck:
    """The plan's predicted env steps to the target against the run's (measured, when reached)."""

    predicted: float | None
    measured: int | None
    references: str | None

    @property
    def relative_error(self) -> float | None:
        ok = self.predicted is not None and self.measured
        return abs(self.predicted - self.measured) / self.measured if ok else None  # type: ignore[operator]

    def to_dict(self) -> JsonObject:
        return {"predicted": self.predicted, "measured": self.measured, "relative_error": self.relative_error,
                "references": self.references, "label": "predicted: modelled; measured: env steps counted"}


@dataclass(frozen=True)
class ModelCheck:
    """Predicted (before each iteration ran) vs measured iteration times, and the steps check."""

    median_abs_error: float | None
    median_abs_error_profile_model: float | None
    iterations_checked: int
    per_iteration: tuple[tuple[float, ...], ...]
    env_steps_to_target: StepsCheck | None = None

    def to_dict(self) -> JsonObject:
        out = {
            "iteration_time_median_abs_error": self.median_abs_error,
            "iteration_time_median_abs_error_profile_model": self.median_abs_error_profile_model,
            "iterations_checked": self.iterations_checked,
            "note": "predicted iteration time (made before the iteration ran) vs the trainer's Lambda-clock iteration time",
            "per_iteration": {"columns": ["iteration", "predicted_s", "measured_s", "learner_s", "cold"],
                              "rows": [list(r) for r in self.per_iteration]},
        }
        if self.env_steps_to_target is not None:
            out["env_steps_to_target"] = self.env_steps_to_target.to_dict()
        return out


def _new_phase(index: int, r: Any, label: str) -> Phase:
    return Phase(
        phase=index, config=r.shape, first_iteration=r.iteration, iterations=0, env_steps=0, predicted_time_s=0.0,
        measured_time_s=0.0, predicted_cost_usd=0.0, measured_cost_usd=0.0, measured_wall_s=0.0,
        label=label + "; measured_wall_s measured locally",
    )


def phases_from_records(
    records: list[Any], planner: Planner, cost_before: float, label: str = LABEL,
) -> tuple[list[Phase], ModelCheck]:
    """Group consecutive iterations by shape; predicted vs measured per phase.

    The prediction for an iteration is the one the controller's model made *before*
    it ran (refitted at each re-plan); without a controller, the profile's model.
    The check also reports the profile-only model's error, for comparison.
    """
    phases: list[Phase] = []
    errors: list[float] = []
    static_errors: list[float] = []
    per_iteration: list[tuple[float, ...]] = []
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
        per_iteration.append((r.iteration, round(pred_t, 4), round(r.iteration_lambda_s, 4), round(r.learner_s, 4), int(r.cold)))
        if not phases or phases[-1].config != r.shape:
            phases.append(_new_phase(len(phases), r, label))
        phases[-1] = phases[-1].add(env_steps=r.shape.batch, predicted_s=pred_t, measured_s=r.iteration_lambda_s,
                                    predicted_usd=pred_c, measured_usd=meas_c, wall_s=r.wall_s)
    check = ModelCheck(
        median_abs_error=float(np.median(errors)) if errors else None,
        median_abs_error_profile_model=float(np.median(static_errors)) if static_errors else None,
        iterations_checked=len(errors),
        per_iteration=tuple(per_iteration),
    )
    return phases, check


def profiling_phase(pilot: PilotSummary, label: str = LABEL) -> Phase:
    """The memory probe and the pilot's own iterations as phase "profiling" of a resumed run."""
    return Phase(
        phase="profiling",
        config="memory probe + pilot sweep (see profile.pilot.memory_probe and .schedule)",
        iterations=pilot.iterations,
        env_steps=pilot.env_steps,
        predicted_time_s=None,
        measured_time_s=pilot.lambda_time_s,
        predicted_cost_usd=None,
        measured_cost_usd=pilot.cost_usd,
        measured_wall_s=pilot.wall_s,
        label=label,
    )


def _pilot_iterations(observations: list[Observation]) -> list[Observation]:
    return [o for o in observations if not o.rollout_only and not o.learner_only]


@dataclass(frozen=True)
class PilotBill:
    """A fresh pilot's part of the tuning bill, and the part of it that is training (all zero
    for a reused profile: this run did not pay for it)."""

    profiling_cost_usd: float = 0.0
    profiling_lambda_time_s: float = 0.0
    probe_cost_usd: float = 0.0
    pilot_training_cost_usd: float = 0.0
    pilot_training_value_usd: float = 0.0
    cold_start_credit_usd: float | None = None  # a fresh pilot's cold start, the run's own


def _fresh_pilot_bill(pilot: PilotOutcome, plan: Plan) -> PilotBill:
    p = pilot.profile.pilot
    training_usd = p.training_cost_usd
    best = plan.outcome.best
    per_step = 0.0 if best is None else best.cost_usd / max(best.env_steps, 1.0)
    # Every run pays one cold start; after a fresh pilot the run starts warm, so the
    # pilot's cold start is the run's own, not tuning: the learner's wait for it (measured:
    # the pilot's first, cold iteration less its second, the same shape warm), and the INIT
    # Lambda bills for each of the run's functions the pilot started (at the pilot's memory
    # size: another size is a new version, whose functions the run starts cold itself).
    first, second = _pilot_iterations(pilot.profile.observations)[:2]
    cold_start_usd = max(0.0, first.iteration_s - second.iteration_s) * plan.prices.learner_usd_per_s
    if best is not None and best.shape.memory_mb == first.shape.memory_mb:
        own = min(best.shape.actors, first.shape.actors)
        cold_start_usd += own * p.cold_init_s * first.shape.memory_mb / 1024 * plan.prices.gb_second_usd
    return PilotBill(
        profiling_cost_usd=p.cost_usd,
        cold_start_credit_usd=cold_start_usd,
        profiling_lambda_time_s=p.lambda_time_s,
        probe_cost_usd=float(p.memory_probe["cost_usd"]),
        pilot_training_cost_usd=training_usd,
        pilot_training_value_usd=min(training_usd, p.env_steps * per_step + cold_start_usd),
    )


@dataclass(frozen=True)
class TuningOverhead:
    """What tuning cost, gross and net of the training the pilot did.

    Gross: the memory probe plus the pilot run plus planning. Net: what would not have
    been spent without tuning - the probe (not trained on), the pilot's cost beyond
    what its env steps would cost at the planned shape plus the one cold start every run
    pays (the run resumes from the pilot, warm, so those steps are training), and
    planning (learner CPU time while it plans).
    """

    pilot: PilotBill
    profiling_wall_s: float
    planning_wall_s: float
    planning_cpu_s: float
    planning_cost_usd: float
    figures: str = LABEL  # how the probe's and pilot's time and cost were got (figures_label)

    @property
    def gross_cost_usd(self) -> float:
        return self.pilot.profiling_cost_usd + self.planning_cost_usd

    @property
    def net_cost_usd(self) -> float:
        return self.gross_cost_usd - self.pilot.pilot_training_value_usd

    def to_dict(self) -> JsonObject:
        b = self.pilot
        out: JsonObject = {
            "profiling_cost_usd": b.profiling_cost_usd, "profiling_lambda_time_s": b.profiling_lambda_time_s,
            "probe_cost_usd": b.probe_cost_usd, "pilot_training_cost_usd": b.pilot_training_cost_usd,
            "pilot_training_value_usd": b.pilot_training_value_usd, "profiling_wall_s": self.profiling_wall_s,
            "planning_wall_s": self.planning_wall_s, "planning_cpu_s": self.planning_cpu_s,
            "planning_cost_usd": self.planning_cost_usd,
        }
        if b.cold_start_credit_usd is not None:
            out["cold_start_credit_usd"] = b.cold_start_credit_usd
        return out | {
            "gross_cost_usd": self.gross_cost_usd, "net_cost_usd": self.net_cost_usd,
            "label": f"profiling cost and time: {self.figures} (probe and pilot ledgers); wall times measured",
            "note": "the pilot is real training: the run resumes from its checkpoint, so its steps count toward the target; "
            "net = gross less what the pilot's env steps would cost at the planned shape and less the run's own cold start",
        }


def tuning_overhead(pilot: PilotOutcome, plan: Plan, planning_wall_s: float, planning_cpu_s: float) -> TuningOverhead:
    """The tuning bill of a run that got ``pilot`` and made ``plan`` (see :class:`TuningOverhead`)."""
    return TuningOverhead(
        pilot=PilotBill() if pilot.reused else _fresh_pilot_bill(pilot, plan),
        profiling_wall_s=pilot.wall_s, planning_wall_s=planning_wall_s, planning_cpu_s=planning_cpu_s,
        planning_cost_usd=planning_cpu_s * plan.prices.learner_usd_per_s, figures=figures_label(pilot.profile.backend),
    )


@dataclass(frozen=True)
class Achieved:
    """What the run achieved, charged the whole tuning bill (see :func:`achieved`)."""

    reached: bool
    env_steps: int
    wall_s: float
    lambda_time_s: float
    lambda_time_label: str
    cost_usd: float
    cost_label: str
    includes_pilot: bool
    planning_cpu_s: float
    planning_cost_usd: float
    final_mean_return: float | None
    stop_reason: str

    def to_dict(self) -> JsonObject:
        return {
            "reached": self.reached,
            "env_steps": self.env_steps,
            "wall_s": self.wall_s,
            "wall_s_label": "measured (this machine, training after profiling; pilot wall in tuning_overhead)",
            "lambda_time_s": self.lambda_time_s,
            "lambda_time_label": self.lambda_time_label,
            "cost_usd": self.cost_usd,
            "cost_label": self.cost_label,
            # time and cost include the whole profiling (memory probe, pilot, learner timing)
            "includes_pilot": self.includes_pilot,
            "includes_planning": {"cpu_s": self.planning_cpu_s, "cost_usd": self.planning_cost_usd,
                                  "label": "measured CPU time, priced as learner VM"},
            "final_mean_return": self.final_mean_return,
            "stop_reason": self.stop_reason,
        }


def achieved(res: Any, pilot: PilotSummary, resumed: bool, overhead: TuningOverhead, fresh: bool = False) -> Achieved:
    """What the run achieved, charged the whole tuning bill.

    Time and cost are the run's ledger (which, after a fresh profile, holds the pilot's
    training: the run resumes from it) plus the rest of the profiling bill (the memory
    probe and the learner timing, not trained on) plus planning (learner-VM CPU time, as
    ``overhead`` prices it): a fresh run is charged everything tuning spent, a cached one
    its planning. ``fresh`` without ``resumed`` (a baseline kept at another layout than the
    pilot's trains from scratch) is charged the whole profiling bill on top of its run.
    """
    charged = resumed or fresh
    untrained_cost = pilot.cost_usd - (pilot.training_cost_usd if resumed else 0.0) if charged else 0.0
    untrained_time = pilot.lambda_time_s - (pilot.training_lambda_time_s if resumed else 0.0) if charged else 0.0
    return Achieved(
        reached=res.reached, env_steps=res.env_steps, wall_s=res.wall_s,
        lambda_time_s=res.lambda_time_s + untrained_time + overhead.planning_cpu_s, lambda_time_label=res.lambda_time_label,
        cost_usd=res.cost_usd + untrained_cost + overhead.planning_cost_usd, cost_label=res.ledger.label,
        includes_pilot=charged, planning_cpu_s=overhead.planning_cpu_s, planning_cost_usd=overhead.planning_cost_usd,
        final_mean_return=res.final_mean_return, stop_reason=res.stop_reason,
    )


@dataclass(frozen=True)
class TrainingSummary:
    """The run's curve, shape changes, ledger and notes, as the trainer reported them."""

    curve: list[CurvePoint]
    config_changes: list[ConfigChange]
    ledger: JsonObject  # CostLedger.to_dict()
    notes: list[str]
    b_noise_final: float | None
    controller_s: float  # the controller's observe and re-plan work between iterations (in the run's time and cost)
    faults: FaultsReport  # faults met and recovered from (docs/faults.md)
    lost_rollouts: int  # with duplicate_rollouts: that no rollout was lost or reused
    duplicate_rollouts: int

    def to_dict(self) -> JsonObject:
        return {
            "curve": self.curve, "config_changes": self.config_changes, "ledger": self.ledger, "notes": self.notes,
            "b_noise_final": self.b_noise_final, "controller_s": self.controller_s, "faults": self.faults,
            "lost_rollouts": self.lost_rollouts, "duplicate_rollouts": self.duplicate_rollouts,
        }


def training_summary(res: Any, b_noise_final: float | None) -> TrainingSummary:
    """The run's curve, shape changes, ledger and notes."""
    return TrainingSummary(
        curve=res.curve, config_changes=res.config_changes, ledger=res.ledger.to_dict(), notes=res.notes,
        b_noise_final=b_noise_final, controller_s=res.controller_s, faults=res.faults,
        lost_rollouts=res.lost_rollouts, duplicate_rollouts=res.duplicate_rollouts,
    )
