"""Search the discrete space of (actors, memory, batch) under the models.

The space is small (a few hundred shapes), so the search is exhaustive: every shape is
scored with predicted time and cost to the target, and the objective picks one
(:mod:`optimizers.seraph.objectives`: ``cost``, ``speed``, ``balanced``; the balanced
objective's scale is the maxima over the Pareto front, so one absurd shape cannot
flatten it).

Constraints (``deadline_s``, ``budget_usd``) filter the candidates first. When no shape
meets them, the answer says so: the best achievable figure for each constraint and which
constraint binds; it never silently returns a shape that breaks a constraint.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Callable, Iterable, Sequence

from serverless.run_shape import RunShape
from optimizers.seraph.objectives import TIE_TOLERANCE, Objective, Scale, scale_of
from core.errors import UserError
from core.json_edge import JsonObject

__all__ = ["TIE_TOLERANCE", "Candidate", "Constraints", "Objective", "SearchOutcome", "choose", "pareto_front", "score_shapes"]


@dataclass(frozen=True)
class Constraints:
    deadline_s: float | None = None
    budget_usd: float | None = None

    def __post_init__(self) -> None:
        for name in ("deadline_s", "budget_usd"):
            v = getattr(self, name)
            if v is not None and not (v > 0 and math.isfinite(v)):
                raise UserError(f"{name} must be a positive number, got {v}")

    def as_dict(self) -> dict[str, float | None]:
        return {"deadline_s": self.deadline_s, "budget_usd": self.budget_usd}


@dataclass(frozen=True)
class Candidate:
    """A shape with its predicted figures to the target (modelled)."""

    shape: RunShape
    iterations: int
    env_steps: int
    time_s: float
    cost_usd: float
    steps_per_env: int = 0  # the rollout layout's env length (0: one env per function)

    def as_dict(self) -> JsonObject:
        return {
            **self.shape.to_dict(),
            "steps_per_env": self.steps_per_env,
            "iterations": self.iterations,
            "env_steps": self.env_steps,
            "predicted_time_s": self.time_s,
            "predicted_cost_usd": self.cost_usd,
        }


@dataclass
class SearchOutcome:
    best: Candidate | None
    feasible: bool
    binding: list[str]
    message: str
    fastest: Candidate
    cheapest: Candidate
    front: list[Candidate] = field(default_factory=list)

    def as_dict(self) -> JsonObject:
        return {
            "best": None if self.best is None else self.best.as_dict(),
            "feasible": self.feasible,
            "binding": self.binding,
            "message": self.message,
            "fastest": self.fastest.as_dict(),
            "cheapest": self.cheapest.as_dict(),
        }


def score_shapes(
    shapes: Iterable[RunShape],
    iteration_time: Callable[[RunShape], float],
    iteration_cost: Callable[[RunShape], float],
    env_steps_to_target: Callable[[RunShape], float],
    steps_per_env: int = 0,
) -> list[Candidate]:
    """Predicted time and cost to the target for each shape, at the layout ``steps_per_env``."""
    out = []
    for s in shapes:
        steps = env_steps_to_target(s)
        iters = max(1, math.ceil(steps / s.batch))
        out.append(Candidate(s, iters, iters * s.batch, iters * iteration_time(s), iters * iteration_cost(s), steps_per_env))
    return out


def pareto_front(cands: Sequence[Candidate]) -> list[Candidate]:
    """Shapes no other shape beats on both time and cost, sorted by time."""
    ordered = sorted(cands, key=lambda c: (c.time_s, c.cost_usd))
    front: list[Candidate] = []
    best_cost = math.inf
    for c in ordered:
        if c.cost_usd < best_cost:
            front.append(c)
            best_cost = c.cost_usd
    return front


def front_scale(front: Sequence[Candidate]) -> Scale:
    """The scale a mixed objective divides by: the front's largest cost and time."""
    return scale_of((c.cost_usd, c.time_s) for c in front)


def _figures(c: Candidate) -> tuple[float, float]:
    return c.cost_usd, c.time_s


def choose(cands: Sequence[Candidate], objective: Objective, constraints: Constraints = Constraints()) -> SearchOutcome:
    """Pick the best candidate for the objective under the constraints."""
    if not cands:
        raise ValueError("no candidates to choose from")
    front = pareto_front(cands)
    fastest = min(cands, key=lambda c: (c.time_s, c.cost_usd))
    cheapest = min(cands, key=lambda c: (c.cost_usd, c.time_s))
    scale = front_scale(front)
    unconstrained = objective.best(cands, _figures, scale)
    d, b = constraints.deadline_s, constraints.budget_usd
    ok = [c for c in cands if (d is None or c.time_s <= d) and (b is None or c.cost_usd <= b)]
    if not ok:
        binding, parts = [], []
        if d is not None and fastest.time_s > d:
            binding.append("deadline_s")
            parts.append(f"the deadline of {d:.3g} s cannot be met: the fastest plan needs {fastest.time_s:.3g} s (modelled)")
        if b is not None and cheapest.cost_usd > b:
            binding.append("budget_usd")
            parts.append(f"the budget of ${b:.6g} cannot be met: the cheapest plan costs ${cheapest.cost_usd:.6g} (modelled)")
        if not binding:  # each alone is feasible, together they are not
            binding = ["deadline_s", "budget_usd"]
            within_d = min((c for c in cands if c.time_s <= d), key=lambda c: c.cost_usd)  # type: ignore[operator]
            parts.append(
                f"the deadline and the budget cannot both be met: within {d:.0f} s the cheapest plan costs "
                f"${within_d.cost_usd:.6g} (budget ${b:.6g})"
            )
        return SearchOutcome(None, False, binding, "infeasible: " + "; ".join(parts), fastest, cheapest, front)
    best = objective.best(ok, _figures, scale)
    binding = []
    if best != unconstrained:
        if d is not None and unconstrained.time_s > d:
            binding.append("deadline_s")
        if b is not None and unconstrained.cost_usd > b:
            binding.append("budget_usd")
    msg = f"{objective.name}: {best.shape.actors} actors x {best.shape.memory_mb} MB, batch {best.shape.batch}"
    if binding:
        msg += f" (constraint binds: {', '.join(binding)})"
    return SearchOutcome(best, True, binding, msg, fastest, cheapest, front)
