"""What Seraph's steps hand on: the plan a run trains with, and what the run achieved.

:class:`SeraphPlan` is the output of the ``plan`` step and the input of ``train``: the
request, the profile it was planned from, the chosen plan and what profiling and planning
cost. :class:`SeraphResult` is what ``train`` (or a plan-only run) returns; its
:meth:`SeraphResult.to_dict` is the JSON ``trainwise rl tune --json-out`` writes.
All time and cost figures on the local backend are the modelled Lambda clock and the
price table (labelled so); ``wall_s`` figures are measured.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from optimizers.seraph.accounting import LABEL
from optimizers.seraph.models import RunShape
from optimizers.seraph.planner import Plan, Planner
from optimizers.seraph.pilot import PilotOutcome
from optimizers.seraph.request import SeraphRequest


@dataclass(frozen=True)
class SeraphPlan:
    """A plan ready to train: ``shape`` is where training starts."""

    request: SeraphRequest
    pilot: PilotOutcome
    plan: Plan
    planner: Planner  # the models the plan was made with; training re-plans with a copy
    overhead: dict[str, Any]  # what profiling and planning cost (see accounting.tuning_overhead)

    @property
    def shape(self) -> RunShape | None:
        return self.plan.shape

    @property
    def feasible(self) -> bool:
        return self.plan.outcome.feasible

    @property
    def message(self) -> str:
        return self.plan.outcome.message

    def to_dict(self) -> dict[str, Any]:
        """The plan as the result JSON's ``plan`` holds it."""
        return self.plan.as_dict()

    def profile_summary(self) -> dict[str, Any]:
        """The result JSON's ``profile``: which profile, whether reused, the pilot's figures."""
        prof = self.pilot.profile
        return {"key": prof.key, "reused": self.pilot.reused, "b_noise_pilot": prof.b_noise, "pilot": prof.pilot}

    def workload_summary(self) -> dict[str, Any]:
        """The result JSON's ``workload``: the profiled workload plus target, seed and backend."""
        r = self.request
        return {
            **r.workload().key_dict(), "target_reward": r.target_reward, "seed": r.seed, "backend": r.backend,
            "inject_faults": r.faults,
        }


# the keys a trained result adds, in the order the JSON lists them
_TRAINED_KEYS = ("achieved", "phases", "model_check", "decisions", "training")


@dataclass(frozen=True)
class SeraphResult:
    """The plan, the profile behind it and, after training, what was achieved."""

    workload: dict[str, Any]
    plan: dict[str, Any]
    profile: dict[str, Any]
    tuning_overhead: dict[str, Any]
    label: str = LABEL
    pareto_png: str | None = None
    achieved: dict[str, Any] | None = None  # reached, env_steps, wall_s, lambda_time_s, cost_usd ...
    phases: list[dict[str, Any]] | None = None  # per phase: configuration, predicted vs measured
    model_check: dict[str, Any] | None = None  # predicted vs measured iteration times
    decisions: list[dict[str, Any]] | None = None  # the re-tuning controller's decisions
    training: dict[str, Any] | None = field(default=None)  # curve, ledger, config changes, notes

    @property
    def trained(self) -> bool:
        return self.achieved is not None

    @classmethod
    def of_plan(cls, planned: SeraphPlan, pareto_png: str | None = None) -> "SeraphResult":
        """The result of a run that stops at the plan."""
        return cls(
            workload=planned.workload_summary(), plan=planned.to_dict(), profile=planned.profile_summary(),
            tuning_overhead=planned.overhead, pareto_png=pareto_png,
        )

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {"label": self.label, "workload": self.workload, "plan": self.plan, "profile": self.profile}
        if self.pareto_png is not None:
            out["pareto_png"] = self.pareto_png
        out["tuning_overhead"] = self.tuning_overhead
        if self.trained:
            out |= {k: getattr(self, k) for k in _TRAINED_KEYS}
        return out

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> "SeraphResult":
        return cls(
            workload=data["workload"], plan=data["plan"], profile=data["profile"],
            tuning_overhead=data["tuning_overhead"], label=data.get("label", LABEL), pareto_png=data.get("pareto_png"),
            **{k: data.get(k) for k in _TRAINED_KEYS},
        )
