"""What Seraph's steps hand on: the plan a run trains with, and what the run achieved.

:class:`SeraphPlan` is the output of the ``plan`` step and the input of ``train``: the
job, the profile it was planned from, the chosen plan and what profiling and planning
cost. :class:`SeraphResult` is what ``train`` (or a plan-only run) returns; its
:meth:`SeraphResult.to_dict` is the JSON ``trainwise rl tune --json-out`` writes.
All time and cost figures on the local backend are the modelled Lambda clock and the
price table (labelled so); ``wall_s`` figures are measured.
"""

from __future__ import annotations

from dataclasses import dataclass

from core.json_edge import JsonObject
from optimizers.seraph.accounting import LABEL, Achieved, ModelCheck, Phase, TrainingSummary, TuningOverhead
from optimizers.seraph.controller import Decision
from optimizers.seraph.learner_choice import LearnerChoice
from serverless.run_shape import RunShape
from optimizers.seraph.online_layout import LayoutDecision
from optimizers.seraph.planner import Plan, Planner
from optimizers.seraph.pilot import PilotOutcome
from optimizers.seraph.job import SeraphJob


@dataclass(frozen=True)
class SeraphPlan:
    """A plan ready to train: ``shape`` is where training starts."""

    job: SeraphJob
    pilot: PilotOutcome
    plan: Plan
    planner: Planner  # the models the plan was made with; training re-plans with a copy
    overhead: TuningOverhead  # what profiling and planning cost
    learner: LearnerChoice | None = None  # the learner's machine for the planned shape

    @property
    def shape(self) -> RunShape | None:
        return self.plan.shape

    @property
    def feasible(self) -> bool:
        return self.plan.outcome.feasible

    @property
    def message(self) -> str:
        return self.plan.outcome.message

    def to_dict(self) -> JsonObject:
        """The plan as the result JSON's ``plan`` holds it (with the learner's machine)."""
        out = self.plan.as_dict()
        if self.learner is not None:
            out["learner"] = self.learner.to_dict()
        return out

    def profile_summary(self) -> JsonObject:
        """The result JSON's ``profile``: which profile, whether reused, the pilot's figures."""
        prof = self.pilot.profile
        return {"key": prof.key, "reused": self.pilot.reused, "b_noise_pilot": prof.b_noise, "pilot": prof.pilot.as_dict()}


@dataclass(frozen=True)
class TrainedRun:
    """What training from the plan achieved, phase by phase, and how well the models predicted it."""

    achieved: Achieved
    phases: tuple[Phase, ...]  # per phase: configuration, predicted vs measured
    model_check: ModelCheck  # predicted vs measured iteration times and env steps
    decisions: tuple[Decision, ...]  # the re-tuning controller's decisions
    training: TrainingSummary  # curve, ledger, config changes, notes
    layout_decisions: tuple[LayoutDecision, ...] = ()  # the online layout decisions, with their evidence

    def to_dict(self) -> JsonObject:
        """The result JSON's keys a trained run adds, in the order it lists them."""
        return {
            "achieved": self.achieved.to_dict(), "phases": [p.to_dict() for p in self.phases],
            "model_check": self.model_check.to_dict(), "decisions": [d.as_dict() for d in self.decisions],
            "layout_decisions": [d.as_dict() for d in self.layout_decisions], "training": self.training.to_dict(),
        }


@dataclass(frozen=True)
class SeraphResult:
    """The plan (with the job and the profile behind it) and, after training, what was achieved."""

    planned: SeraphPlan
    label: str = LABEL
    pareto_png: str | None = None
    run: TrainedRun | None = None  # None: the run stopped at the plan

    @property
    def achieved(self) -> Achieved | None:
        return None if self.run is None else self.run.achieved

    def to_dict(self) -> JsonObject:
        planned = self.planned
        out: JsonObject = {
            "label": self.label, "workload": planned.job.summary(), "plan": planned.to_dict(),
            "profile": planned.profile_summary(),
        }
        if self.pareto_png is not None:
            out["pareto_png"] = self.pareto_png
        out["tuning_overhead"] = planned.overhead.to_dict()
        if self.run is not None:
            out |= self.run.to_dict()
        return out
