"""Do no harm: the baseline stays unless the model predicts a saving larger than its own error.

The configuration the user would otherwise run (:mod:`optimizers.seraph.baseline`) is
always a candidate. When the search's best is another configuration, Seraph takes it only
if it beats the baseline's prediction even with the model's measured error on this workload
added to its own: ``best * (1 + error) < baseline`` on the objective, i.e. a predicted saving
larger than ``error / (1 + error)`` (about the error itself for errors of 10-20%). The error is
the leave-one-out median error of the predicted iteration time over the profile
(``PerformanceModel.fit_error``). A smaller predicted saving is no evidence that the change
saves anything, and the baseline is what the user would pay without Seraph. The multiplicative
form keeps a saving that comes from the env steps (a layout whose reference runs need a third
of the baseline's) when a profile taken under heavy load is far off (62% leave-one-out error
was seen on CartPole): the error scales the best's figures, it cannot erase a threefold
difference in steps.

This covers the time and price of an iteration. The env steps to the target are gated before
the pilot (:mod:`optimizers.seraph.layout`): a layout other than the baseline's is tried only
when its reference runs needed significantly fewer env steps.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from core.json_edge import JsonObject
from optimizers.seraph.objectives import Objective
from optimizers.seraph.search import Candidate, Constraints, SearchOutcome, front_scale

#: The largest model error a change is held to, here and in the re-tuning controller. A
#: leave-one-out error above it comes from a pilot of too few distinct shapes to fit the model
#: without one of them (at a layout of one or two slots the pilot visits one batch and two
#: function counts, and leaving one out makes the fit extrapolate): it measures the pilot's
#: design, not the model. At 25% a change must still promise a 20% saving.
MODEL_ERROR_CAP = 0.25


@dataclass(frozen=True)
class BaselineVerdict:
    """Which the plan chose, the search's best or the baseline, and why."""

    baseline: Candidate
    chosen: str  # "baseline" or "search"
    reason: str
    predicted_saving: float | None = None  # on the objective, relative to the baseline (modelled)
    model_error: float | None = None

    def as_dict(self) -> JsonObject:
        return {
            "config": self.baseline.as_dict(),
            "chosen": self.chosen,
            "reason": self.reason,
            "predicted_saving": self.predicted_saving,
            "model_error": self.model_error,
            "label": "modelled (Lambda clock and price table); model_error is the iteration-time fit's "
            "leave-one-out median error",
        }


def _within(c: Candidate, constraints: Constraints) -> bool:
    d, b = constraints.deadline_s, constraints.budget_usd
    return (d is None or c.time_s <= d) and (b is None or c.cost_usd <= b)


def _same(a: Candidate, b: Candidate) -> bool:
    return a.shape == b.shape and a.steps_per_env == b.steps_per_env


def predicted_saving(objective: Objective, outcome: SearchOutcome, baseline: Candidate, best: Candidate) -> float:
    """The objective's predicted relative saving of ``best`` over ``baseline`` (the front's scale)."""
    scale = front_scale(outcome.front)
    base_v = objective.value(baseline.cost_usd, baseline.time_s, scale)
    best_v = objective.value(best.cost_usd, best.time_s, scale)
    return (base_v - best_v) / base_v if base_v > 0 else 0.0


def saving_needed(model_error: float) -> float:
    """The predicted saving a change must exceed: ``error / (1 + error)`` (see the module's docstring)."""
    return model_error / (1.0 + model_error)


def keep_baseline_unless_saving(
    outcome: SearchOutcome, baseline: Candidate, objective: Objective, constraints: Constraints, model_error: float | None
) -> tuple[SearchOutcome, BaselineVerdict]:
    """The outcome with the baseline as its best unless the search's best saves more than
    ``model_error`` (see the module's docstring), and the verdict."""
    best = outcome.best
    error = 0.0 if model_error is None else float(model_error)
    if best is None:
        return outcome, BaselineVerdict(baseline, "search", "no feasible plan; the baseline is not feasible either", None, error)
    if _same(best, baseline):
        return outcome, BaselineVerdict(baseline, "baseline", "the search's best is the baseline", 0.0, error)
    saving = predicted_saving(objective, outcome, baseline, best)
    if not _within(baseline, constraints):
        return outcome, BaselineVerdict(
            baseline, "search", "the baseline breaks the deadline or the budget (modelled)", saving, error
        )
    if saving > saving_needed(error):
        return outcome, BaselineVerdict(
            baseline, "search",
            f"predicted saving {saving:.1%} on {objective.name} holds with the model's error {error:.1%} added", saving, error,
        )
    msg = (
        f"{objective.name}: the baseline {baseline.shape.actors} actors x {baseline.shape.memory_mb} MB, batch "
        f"{baseline.shape.batch}, {baseline.steps_per_env} steps per env (the best other plan saves {saving:.1%}, "
        f"within the model's error {error:.1%})"
    )
    kept = replace(outcome, best=baseline, message=msg)
    return kept, BaselineVerdict(
        baseline, "baseline", f"predicted saving {saving:.1%} on {objective.name} is within the model's error {error:.1%}",
        saving, error,
    )


@dataclass(frozen=True)
class MemoryVerdict:
    """A size known from the memory probe alone against the pilot's measured size: which
    one the plan keeps, and why."""

    probed_mb: int
    measured_mb: int
    predicted_saving: float
    model_error: float
    chosen: int
    reason: str

    def as_dict(self) -> JsonObject:
        return {"probed_mb": self.probed_mb, "measured_mb": self.measured_mb, "predicted_saving": self.predicted_saving,
                "model_error": self.model_error, "chosen": self.chosen, "reason": self.reason}


def keep_measured_memory(
    outcome: SearchOutcome, candidates: list[Candidate], objective: Objective, constraints: Constraints,
    model_error: float | None, measured_mb: int,
) -> tuple[SearchOutcome, MemoryVerdict | None]:
    """The same rule for the memory size: the pilot trains at ``measured_mb``, every other size
    is known from one warm call of the memory probe. The best shape at another size is taken
    only if its saving over the same shape at ``measured_mb`` holds with ``model_error`` added; a
    single call under load can read a size above one vCPU as faster than a single-threaded
    handler can run there. Returns the outcome and, when the rule applied, what it decided."""
    best = outcome.best
    if best is None or best.shape.memory_mb == measured_mb:
        return outcome, None
    same = [c for c in candidates if c.steps_per_env == best.steps_per_env and c.shape.actors == best.shape.actors
            and c.shape.batch == best.shape.batch and c.shape.memory_mb == measured_mb]
    if not same or not _within(same[0], constraints):
        return outcome, None
    measured, error = same[0], 0.0 if model_error is None else float(model_error)
    saving = predicted_saving(objective, outcome, measured, best)
    probed_mb = best.shape.memory_mb
    if saving > saving_needed(error):
        return outcome, MemoryVerdict(probed_mb, measured_mb, saving, error, probed_mb,
                                      f"{probed_mb} MB saves {saving:.1%}, more than the model's error {error:.1%}")
    msg = (f"{objective.name}: {measured.shape.actors} actors x {measured_mb} MB, batch {measured.shape.batch} "
           f"({probed_mb} MB, known from the probe alone, saves {saving:.1%}, within the model's error {error:.1%})")
    return replace(outcome, best=measured, message=msg), MemoryVerdict(
        probed_mb, measured_mb, saving, error, measured_mb,
        f"{probed_mb} MB saves {saving:.1%}, within the model's error {error:.1%}: the pilot's size stays",
    )
