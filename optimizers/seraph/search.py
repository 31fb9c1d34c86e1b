"""Search the discrete space of (actors, memory, batch) under the models.

The space is small (a few hundred shapes), so the search is exhaustive: every shape is
scored with predicted time and cost to the target, and the objective picks one. The
objectives follow AWS Lambda Power Tuning's names: ``cost`` (cheapest, ties broken by
speed), ``speed`` (fastest, ties broken by cost; predictions within 3% count as ties) and ``balanced`` with weight ``w``
(minimise ``w * cost / max_cost + (1 - w) * time / max_time``; the maxima are taken over
the Pareto front, so one absurd shape cannot flatten the scale).

Constraints (``deadline_s``, ``budget_usd``) filter the candidates first. When no shape
meets them, the answer says so: the best achievable figure for each constraint and which
constraint binds; it never silently returns a shape that breaks a constraint.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any, Callable, Iterable, Sequence

from optimizers.seraph.models import RunShape
from core.errors import UserError

OBJECTIVES = ("cost", "speed", "balanced")


@dataclass(frozen=True)
class Constraints:
    deadline_s: float | None = None
    budget_usd: float | None = None

    def __post_init__(self) -> None:
        for name in ("deadline_s", "budget_usd"):
            v = getattr(self, name)
            if v is not None and not (v > 0 and math.isfinite(v)):
                raise UserError(f"--{name.replace('_', '-')} must be a positive number, got {v}")

    def as_dict(self) -> dict[str, float | None]:
        return {"deadline_s": self.deadline_s, "budget_usd": self.budget_usd}


@dataclass(frozen=True)
class Objective:
    name: str
    weight: float = 0.5  # only for "balanced": the weight of cost (1 - weight goes to time)

    def __post_init__(self) -> None:
        if self.name not in OBJECTIVES:
            raise UserError(f"--objective {self.name!r} is not known; allowed: {', '.join(OBJECTIVES)}")
        if not 0.0 <= self.weight <= 1.0:
            raise UserError(f"--weight must be between 0 and 1 (the weight of cost in 'balanced'), got {self.weight}")


@dataclass(frozen=True)
class Candidate:
    """A shape with its predicted figures to the target (modelled)."""

    shape: RunShape
    iterations: int
    env_steps: int
    time_s: float
    cost_usd: float

    def as_dict(self) -> dict[str, Any]:
        return {
            **self.shape.as_dict(),
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

    def as_dict(self) -> dict[str, Any]:
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
) -> list[Candidate]:
    """Predicted time and cost to the target for each shape."""
    out = []
    for s in shapes:
        steps = env_steps_to_target(s)
        iters = max(1, math.ceil(steps / s.batch))
        out.append(Candidate(s, iters, iters * s.batch, iters * iteration_time(s), iters * iteration_cost(s)))
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


def _key(objective: Objective, front: Sequence[Candidate]) -> Callable[[Candidate], tuple[float, float]]:
    if objective.name == "cost":
        return lambda c: (c.cost_usd, c.time_s)
    if objective.name == "speed":
        return lambda c: (c.time_s, c.cost_usd)
    max_cost = max(c.cost_usd for c in front) or 1.0
    max_time = max(c.time_s for c in front) or 1.0
    w = objective.weight
    return lambda c: (w * c.cost_usd / max_cost + (1 - w) * c.time_s / max_time, c.time_s)


# Predicted figures closer than this are ties for ``cost`` and ``speed``: the models are
# good to ~10-15% (iteration-time error) and the memory probe's single calls to ~2-3%, so a
# shape 2% faster on paper (e.g. 3,008 MB for a single-threaded handler, which the emulator
# cannot make faster than 1,769 MB) is no reason to pay 70% more per GB-second.
TIE_TOLERANCE = 0.03


def _best(cands: Sequence[Candidate], objective: Objective, key: Callable[[Candidate], tuple[float, float]]) -> Candidate:
    """The best candidate by ``key``; for ``cost`` and ``speed``, the best on the other
    figure among those within ``TIE_TOLERANCE`` of the best on the objective's own."""
    best = min(cands, key=key)
    if objective.name == "cost":
        near = [c for c in cands if c.cost_usd <= best.cost_usd * (1 + TIE_TOLERANCE)]
        return min(near, key=lambda c: (c.time_s, c.cost_usd))
    if objective.name == "speed":
        near = [c for c in cands if c.time_s <= best.time_s * (1 + TIE_TOLERANCE)]
        return min(near, key=lambda c: (c.cost_usd, c.time_s))
    return best


def choose(cands: Sequence[Candidate], objective: Objective, constraints: Constraints = Constraints()) -> SearchOutcome:
    """Pick the best candidate for the objective under the constraints."""
    if not cands:
        raise ValueError("no candidates to choose from")
    front = pareto_front(cands)
    fastest = min(cands, key=lambda c: (c.time_s, c.cost_usd))
    cheapest = min(cands, key=lambda c: (c.cost_usd, c.time_s))
    key = _key(objective, front)
    unconstrained = _best(cands, objective, key)
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
    best = _best(ok, objective, key)
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
