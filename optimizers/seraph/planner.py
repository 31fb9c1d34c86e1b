"""From a profile to a plan, and re-planning during the run.

:class:`Planner` fits the performance and cost models to a profile, turns the noise
scale into steps-to-target with :class:`~optimizers.seraph.models.ProgressModel`,
scores every shape of the search space, and picks one for the objective under the
constraints. During training it is also the controller's :class:`Replanner`: it
takes in each iteration record (new noise-scale measurements, progress, spend) and
plans the *rest* of training under what is left of the deadline and budget.

Where steps-to-target come from. The noise scale fixes the *shape* of the
steps-vs-batch curve, not its scale: ``E(B) = E_min (1 + B / B_noise)`` needs one
point. We take it from a :class:`Reference` (env steps to the target at one or more
batches): measured points from ``optimizers/seraph/data/references.json`` (made by
``python -m optimizers.seraph.references``), else the figures in ``REFERENCES`` below,
else an assumed half of ``max_steps``. The run corrects it: once the steps already spent
pass the estimate without reaching the target, the rest is re-estimated from the
reward still missing (see :meth:`Planner.remaining_fraction`).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any, Callable, Sequence

import numpy as np

from optimizers.seraph.models import CostModel, Observation, PerformanceModel, Prices, ProgressModel, RunShape, all_shapes
from optimizers.seraph.noise_scale import NoiseScaleTracker
from optimizers.seraph.profiles import Profile
from optimizers.seraph.search import Candidate, Constraints, Objective, SearchOutcome, choose, score_shapes
from serverless.slots import slot_count

DEFAULT_ACTORS = (1, 2, 4, 8, 16, 32, 64, 128, 256)
DEFAULT_MEMORY_SWEEP = (512, 885, 1769, 3008, 5307, 10240)
DEFAULT_BATCHES = (500, 1000, 2000, 4000, 8000)


@dataclass(frozen=True)
class SearchSpace:
    """The discrete space Seraph searches.

    ``batches`` stays in a range where PPO (10 epochs of 64-sample minibatches) still
    learns the built-in tasks; ``min_steps_per_actor`` keeps each actor's segment long
    enough that episodes complete often and the bootstrapped tails stay a small part
    of the batch (CleanRL's PPO uses 128-step segments).
    """

    actors: tuple[int, ...] = DEFAULT_ACTORS
    memories: tuple[int, ...] = DEFAULT_MEMORY_SWEEP
    batches: tuple[int, ...] = DEFAULT_BATCHES
    min_steps_per_actor: int = 125

    def shapes(self) -> list[RunShape]:
        return all_shapes(self.actors, self.memories, self.batches, min_steps_per_actor=self.min_steps_per_actor)

    def as_dict(self) -> dict[str, Any]:
        return {
            "actors": list(self.actors),
            "memory_mb": list(self.memories),
            "batch": list(self.batches),
            "min_steps_per_actor": self.min_steps_per_actor,
        }


@dataclass(frozen=True)
class Reference:
    """Env steps to the target at one or more batch sizes, and where they came from."""

    points: tuple[tuple[int, float], ...]  # (batch, env steps to target)
    source: str
    actors: int = 4  # the actor count of ``points``
    # the same measured at other actor counts: ((actors, ((batch, env steps), ...)), ...)
    by_actors: tuple[tuple[int, tuple[tuple[int, float], ...]], ...] = ()
    runs: tuple[tuple[int, int, float], ...] = ()  # every run behind the points: (actors, batch, env steps)

    @property
    def batch(self) -> int:
        return int(self.points[0][0])

    @property
    def env_steps(self) -> float:
        return float(self.points[0][1])

    def as_dict(self) -> dict[str, Any]:
        d: dict[str, Any] = {"points": [list(p) for p in self.points], "actors": self.actors, "source": self.source}
        if self.by_actors:
            d["by_actors"] = {str(a): [list(p) for p in pts] for a, pts in self.by_actors}
        return d


def fit_progress(points: Sequence[tuple[int, float]]) -> tuple[float, float]:
    """(E_min, B_noise) of ``E(B) = E_min (1 + B / B_noise)`` fitted to measured points
    (least squares on log E; B_noise on a log grid, E_min in closed form)."""
    logs = [(b, math.log(e)) for b, e in points]
    best: tuple[float, float, float] | None = None
    for bn in np.logspace(0, 7, 701):
        resid = [le - math.log(1 + b / bn) for b, le in logs]
        lm = sum(resid) / len(resid)
        err = sum((r - lm) ** 2 for r in resid)
        if best is None or err < best[0]:
            best = (err, float(bn), math.exp(lm))
    assert best is not None
    return best[2], best[1]


# Measured or assumed points per built-in env: env steps to the usual target with the
# trainer's preset PPO settings (4 actors) and a step cap of 3x the preset's (the learning
# rate anneals over the cap). See docs/seraph.md ("Reference points").
REFERENCES: dict[str, Reference] = {
    "CartPole-v1": Reference(
        points=((256, 28_160), (1024, 28_672), (4000, 144_000)),
        source="measured: trainer preset, local backend, seed 0, max_steps 300k, target 475 (docs/seraph.md)",
    ),
    "LunarLander-v3": Reference(
        points=((16384, 1_000_000),),
        source="assumed: the trainer preset's 1M-step budget (rl-baselines3-zoo's), target 200 (docs/seraph.md)",
    ),
}


def reference_for(env_id: str, max_steps: int, batch: int, steps_per_env: int = 0) -> Reference:
    """The measured references of ``env_id`` at the slot length ``steps_per_env``
    (:func:`optimizers.seraph.references.measured_reference`), else the built-in points,
    else half of ``max_steps`` at ``batch``."""
    from optimizers.seraph.references import measured_reference

    measured = measured_reference(env_id, steps_per_env)
    if measured is not None:
        return Reference(
            points=tuple((int(b), float(e)) for b, e in measured["points"]),
            source=measured["source"],
            actors=int(measured["actors"]),
            by_actors=tuple(
                (int(a), tuple((int(b), float(e)) for b, e in entry["points"]))
                for a, entry in sorted(measured.get("by_actors", {}).items(), key=lambda kv: int(kv[0]))
            ),
            runs=tuple(
                (int(entry["actors"]), int(r["batch"]), float(r["env_steps"]))
                for entry in (measured, *measured.get("by_actors", {}).values())
                for r in entry.get("runs", [])
            ),
        )
    ref = REFERENCES.get(env_id)
    if ref is not None:
        return ref
    return Reference(points=((batch, max_steps / 2),), source="assumed: half of max_steps")


ACTOR_FACTOR_P = 0.05  # the conventional level; not tuned


def rank_sum_p(x: Sequence[float], y: Sequence[float]) -> float:
    """Two-sided p-value of the Mann-Whitney rank-sum test (normal approximation with
    continuity correction, as ``scipy.stats.mannwhitneyu(method="asymptotic")``; ties
    count half, without the tie correction of the variance)."""
    n1, n2 = len(x), len(y)
    u = sum(1.0 if a > b else 0.5 if a == b else 0.0 for a in x for b in y)
    mu = n1 * n2 / 2.0
    sigma = math.sqrt(n1 * n2 * (n1 + n2 + 1) / 12.0)
    z = max(abs(u - mu) - 0.5, 0.0) / sigma
    return math.erfc(z / math.sqrt(2.0))


#: Reference batches whose runs' env steps to the target the rank-sum test cannot tell
#: from the fewest-steps batch's at p >= this count as tied with it; the conventional level.
STEPS_TIE_P = 0.05


def steps_tied_batches(medians: dict[int, float], runs: dict[int, list[float]]) -> list[int]:
    """The batch whose runs reached the target in the fewest env steps (median), then, in
    ascending order, the larger batches whose runs the rank-sum test cannot tell from its
    (p >= ``STEPS_TIE_P``, three runs or more on each side)."""
    fewest = min(medians, key=lambda b: (medians[b], b))
    base = runs.get(fewest, [])
    tied = [
        b for b in medians
        if b > fewest and len(base) >= 3 and len(runs.get(b, [])) >= 3 and rank_sum_p(runs[b], base) >= STEPS_TIE_P
    ]
    return [fewest, *sorted(tied)]


def tie_pooled_points(reference: Reference, batches: Sequence[int]) -> tuple[tuple[int, float], ...]:
    """The reference's points with the searched ``batches`` tied with the fewest-steps one
    of them (:func:`steps_tied_batches`, the rule that also picks the pilot's batch) all at
    the median of their pooled runs: the progress model does not rank batches on a
    difference their runs cannot show. Points at batches outside the search keep their
    medians."""
    medians = {int(b): float(e) for b, e in reference.points if int(b) in batches}
    if not medians:
        return reference.points
    runs = {b: [e for a, rb, e in reference.runs if a == reference.actors and rb == b] for b in medians}
    tied = steps_tied_batches(medians, runs)
    if len(tied) < 2:
        return reference.points
    pooled = float(np.median([e for b in tied for e in runs[b]]))
    return tuple((int(b), pooled if int(b) in tied else float(e)) for b, e in reference.points)


@dataclass
class Plan:
    """The chosen configuration with its predicted figures (all modelled)."""

    objective: Objective
    constraints: Constraints
    outcome: SearchOutcome
    progress: ProgressModel
    reference: Reference
    perf: PerformanceModel
    prices: Prices
    space: SearchSpace
    candidates: list[Candidate]
    iteration_s: float | None = None
    iteration_cost_usd: float | None = None
    noise: dict[str, Any] = field(default_factory=dict)

    @property
    def shape(self) -> RunShape | None:
        return None if self.outcome.best is None else self.outcome.best.shape

    def as_dict(self) -> dict[str, Any]:
        best = self.outcome.best
        return {
            "objective": self.objective.name,
            "weight": self.objective.weight if self.objective.name == "balanced" else None,
            "constraints": self.constraints.as_dict(),
            "feasible": self.outcome.feasible,
            "binding": self.outcome.binding,
            "message": self.outcome.message,
            "config": None if best is None else best.shape.as_dict(),
            "predicted": None
            if best is None
            else {
                "label": "modelled (Lambda clock and price table)",
                "iterations": best.iterations,
                "env_steps": best.env_steps,
                "time_s": best.time_s,
                "cost_usd": best.cost_usd,
                "iteration_s": self.iteration_s,
                "iteration_cost_usd": self.iteration_cost_usd,
            },
            "fastest": self.outcome.fastest.as_dict(),
            "cheapest": self.outcome.cheapest.as_dict(),
            "pareto_front": [c.as_dict() for c in self.outcome.front],
            "progress_model": {**self.progress.as_dict(), "reference": self.reference.as_dict(), "noise": self.noise},
            "performance_model": self.perf.as_dict(),
            "prices": self.prices.as_dict(),
            "search_space": self.space.as_dict(),
            "candidates": len(self.candidates),
        }


def objective_key(objective: Objective, front: Sequence[Candidate]) -> Callable[[Candidate], float]:
    """A scalar to minimise for ``objective`` (balanced: normalised by the front's maxima)."""
    if objective.name == "cost":
        return lambda c: c.cost_usd
    if objective.name == "speed":
        return lambda c: c.time_s
    mc = max((c.cost_usd for c in front), default=1.0) or 1.0
    mt = max((c.time_s for c in front), default=1.0) or 1.0
    w = objective.weight
    return lambda c: w * c.cost_usd / mc + (1 - w) * c.time_s / mt


@dataclass
class Planner:
    profile: Profile
    objective: Objective
    constraints: Constraints
    prices: Prices
    reference: Reference
    space: SearchSpace = field(default_factory=SearchSpace)
    target_reward: float | None = None
    tracker: NoiseScaleTracker = field(default_factory=NoiseScaleTracker)
    # run state, fed by observe()
    env_steps: int = 0
    spent_s: float = 0.0
    spent_usd: float = 0.0
    first_return: float | None = None
    last_return: float | None = None
    last_front: list[Candidate] = field(default_factory=list)
    episode_steps: int = 0  # the env's episode time limit (see env_steps_to_target)
    recent_window: int = 30  # run iterations that join the profile when the model is refitted
    run_observations: list[Observation] = field(default_factory=list)
    predictions: dict[int, dict[str, float]] = field(default_factory=dict)

    def __post_init__(self) -> None:
        self.perf = PerformanceModel.fit(self.profile.observations)
        self.profile_perf = self.perf  # as fitted to the profile alone (reported in the plan)
        self.cost = CostModel(self.perf, self.prices)
        self.space = SearchSpace(
            self.space.actors,
            tuple(m for m in self.space.memories if m in self.perf.memory_levels) or tuple(self.perf.memory_levels),
            self.space.batches,
            self.space.min_steps_per_actor,
        )
        self._b_noise_profile = self.profile.b_noise
        self.progress_points = tie_pooled_points(self.reference, self.space.batches)  # what the progress model fits
        self.steps_per_env = int(self.profile.workload.get("ppo", {}).get("steps_per_env", 0) or 0)
        if self.steps_per_env > 0:
            # env slots: the actor count does not change what is learned (serverless.slots.slot_plan)
            self._actor_factors, self.actor_factor_tests = [(self.reference.actors, 1.0)], {}
        else:
            self._actor_factors, self.actor_factor_tests = self._measure_actor_factors()

    # ---------------------------------------------------------------- the noise scale
    @property
    def live_b_simple(self) -> float | None:
        return self.tracker.value if self.tracker.count >= 3 else None

    def noise_growth(self) -> float:
        """How much the live B_simple has grown since the pilot (1 to 4)."""
        live, pilot = self.live_b_simple, self._b_noise_profile
        if live is None or not pilot:
            return 1.0
        return min(max(live / pilot, 1.0), 4.0)

    def episodes_in_flight(self, actors: int, batch: int) -> int:
        """The episodes run side by side: one per function, or with env slots one per slot."""
        return slot_count(batch, actors, self.steps_per_env)

    def _net_of_lag(self, env_steps: float, actors: int, batch: int) -> float:
        """Steps to the target less the detection lag at ``actors`` and ``batch`` (see
        env_steps_to_target), at least half of them."""
        return max(env_steps - self.episodes_in_flight(actors, batch) * self.episode_steps, 0.5 * env_steps)

    def _lagged_points(self, actors: int | None = None, points: Sequence[tuple[int, float]] | None = None) -> list[tuple[int, float]]:
        a = self.reference.actors if actors is None else actors
        return [(int(b), self._net_of_lag(e, a, int(b))) for b, e in (self.reference.points if points is None else points)]

    def actor_factors(self) -> list[tuple[int, float]]:
        """(actors, env-steps factor) relative to the reference's actor count, as used."""
        return list(self._actor_factors)

    def _measure_actor_factors(self) -> tuple[list[tuple[int, float]], dict[int, dict[str, float | None]]]:
        """The factors to use, and for every measured actor count its factor and p-value.

        For each actor count measured in ``reference.by_actors``: the geometric mean, over
        the batches measured at both, of its steps to the target over the reference's
        (each net of its detection lag). More actors fill a batch with more, shorter episode
        fragments, which can help (less correlated samples) or hurt (more bootstrapped
        segment ends). A factor is used only when the runs behind it differ from the
        reference's at p < ``ACTOR_FACTOR_P`` (:func:`rank_sum_p`); steps to a target
        spread 2-5x across seeds, and an optimiser fed a noisy point estimate picks
        whatever the noise favours. Otherwise, and without such measurements, it is 1.
        """
        base = dict(self._lagged_points())
        out = [(self.reference.actors, 1.0)]
        tests: dict[int, dict[str, float | None]] = {}
        for a, pts in self.reference.by_actors:
            logs = [math.log(e / base[b]) for b, e in self._lagged_points(a, pts) if b in base]
            if not logs or a == self.reference.actors:
                continue
            factor = math.exp(sum(logs) / len(logs))
            p = self._actor_p_value(a, base)
            tests[a] = {"measured_factor": factor, "p_value": p}
            if p is not None and p < ACTOR_FACTOR_P:
                out.append((a, factor))
        return sorted(out), tests

    def _actor_p_value(self, actors: int, base_medians: dict[int, float]) -> float | None:
        """Rank-sum p-value of the runs at ``actors`` against the reference's at the same
        batches, each run's steps (net of lag) relative to the reference's median there."""
        common = {b for ra, b, _ in self.reference.runs if ra == actors} & set(base_medians)

        def rel(a: int) -> list[float]:
            return [self._net_of_lag(e, a, b) / base_medians[b] for ra, b, e in self.reference.runs if ra == a and b in common]

        x, y = rel(actors), rel(self.reference.actors)
        return rank_sum_p(x, y) if x and y else None

    def actor_factor(self, actors: int) -> float:
        """The measured factor at ``actors``, interpolated in log2(actors), flat beyond the ends."""
        pts = self._actor_factors
        if actors <= pts[0][0]:
            return pts[0][1]
        if actors >= pts[-1][0]:
            return pts[-1][1]
        return float(np.interp(math.log2(actors), [math.log2(a) for a, _ in pts], [f for _, f in pts]))

    @property
    def b_noise(self) -> float:
        """The B_noise the progress model uses.

        With two or more reference points: the level fitted to them, times the growth of
        the live gradient noise scale since the pilot (McCandlish: it grows as training
        proceeds). The raw B_simple of the PPO loss is not used as the level: on
        CartPole it measures 2 to 13, while the measured steps-vs-batch curve is flat up
        to ~1,000 (docs/seraph.md). With one reference point: the live (else pilot)
        B_simple itself.
        """
        if len(self.reference.points) >= 2:
            return fit_progress(self._lagged_points(points=self.progress_points))[1] * self.noise_growth()
        live = self.live_b_simple
        if live is not None:
            return live
        if self._b_noise_profile is not None:
            return self._b_noise_profile
        return float(self.reference.batch)  # no measurement at all: assume B_noise near the reference batch

    def progress_model(self) -> ProgressModel:
        """E(B), calibrated on the reference (net of its detection lag, see below).

        With two or more measured points the model passes through them (the fitted
        curve times a measured residual): on CartPole the 8-seed medians are flat from
        512 to 1,024 and then rise faster than the curve allows, and a smooth fit
        through them ranked 512 ahead of 1,024 by a third, which the grid did not bear
        out. Live growth of the noise scale still moves the curve.
        """
        pts = self._lagged_points(points=self.progress_points)
        if len(pts) >= 2:
            e_min, b_fit = fit_progress(pts)
            fitted = ProgressModel.through_points(b_fit, e_min, pts)
            return ProgressModel(b_noise=self.b_noise, e_min=e_min, residual=fitted.residual)
        b, e = pts[0]
        return ProgressModel.calibrate(self.b_noise, e, b)

    def noise_report(self) -> dict[str, Any]:
        return {
            "b_noise_used": self.b_noise,
            "progress_points": [list(p) for p in self.progress_points],
            "b_noise_source": "reference fit x live growth" if len(self.reference.points) >= 2 else "gradient noise scale",
            "b_simple_pilot": self._b_noise_profile,
            "b_simple_live": self.live_b_simple,
            "growth": self.noise_growth(),
            "actor_factors": [list(p) for p in self._actor_factors],
            "actor_factor_tests": {str(a): t for a, t in self.actor_factor_tests.items()},
        }

    # ---------------------------------------------------------------- planning
    def env_steps_to_target(self, progress: ProgressModel, s: RunShape) -> float:
        """McCandlish's E(B) times the measured actor factor (:meth:`actor_factors`), plus
        the steps it takes to *see* the target.

        The trainer judges the target on completed episodes. When the policy becomes
        good enough, each env in flight still has an episode that must finish before good
        returns fill the reach window: about one episode per env, ``n * episode_steps``
        env steps (the env's time limit, an upper bound), where ``n`` is the actor count,
        or with env slots the slot count, which the actor count does not change
        (:meth:`episodes_in_flight`). Without slots this is what makes many short actor
        segments slower to the target than their rollout time suggests (measured on
        CartPole: 16 actors needed ~40% more steps than 1).
        """
        lag = self.episodes_in_flight(s.actors, s.batch) * self.episode_steps
        return progress.env_steps(s.batch) * self.actor_factor(s.actors) + lag

    def _score(self, progress: ProgressModel, shapes: Sequence[RunShape]) -> list[Candidate]:
        return score_shapes(
            shapes, self.perf.iteration_s, self.cost.iteration_cost, lambda s: self.env_steps_to_target(progress, s)
        )

    def plan(self) -> Plan:
        """Plan the whole run from the profile."""
        progress = self.progress_model()
        cands = self._score(progress, self.space.shapes())
        outcome = choose(cands, self.objective, self.constraints)
        self.last_front = outcome.front
        plan = Plan(
            self.objective, self.constraints, outcome, progress, self.reference, self.perf, self.prices, self.space, cands
        )
        plan.noise = self.noise_report()
        if outcome.best is not None:
            plan.iteration_s = self.perf.iteration_s(outcome.best.shape)
            plan.iteration_cost_usd = self.cost.iteration_cost(outcome.best.shape)
        return plan

    # ---------------------------------------------------------------- Replanner protocol
    @property
    def memory_levels(self) -> Sequence[int]:
        return self.space.memories

    @property
    def min_steps_per_actor(self) -> int:
        return self.space.min_steps_per_actor

    def observe(self, record: Any) -> None:
        """Log what the current model predicted for this iteration, then learn from it."""
        from optimizers.seraph.records import observation, view

        r = view(record)
        self.predictions[r.iteration] = {
            "predicted_s": self.perf.iteration_s(r.shape),
            "predicted_cost_usd": self.cost.iteration_cost(r.shape),
            "measured_s": r.iteration_lambda_s,
        }
        if not r.cold:
            self.run_observations.append(observation(record))
        self.env_steps = r.env_steps
        self.spent_s += r.iteration_lambda_s
        self.spent_usd = r.cost_usd
        if r.mean_return is not None:
            if self.first_return is None:
                self.first_return = r.mean_return
            self.last_return = r.mean_return
        if r.grad_noise is not None:
            try:
                self.tracker.update_from_stats(r.grad_noise, env_steps=r.env_steps)
            except (ValueError, KeyError, TypeError):
                pass  # a malformed probe is skipped, not fatal

    def prediction_error(self, last: int = 10) -> float | None:
        """Median relative error of the predicted iteration time over the last ``last``
        iterations (None before 3): the controller will not act on a smaller gain."""
        rows = [self.predictions[i] for i in sorted(self.predictions)][-last:]
        errs = [abs(r["predicted_s"] - r["measured_s"]) / r["measured_s"] for r in rows if r["measured_s"] > 0]
        return float(np.median(errs)) if len(errs) >= 3 else None

    def remaining_fraction(self, progress: ProgressModel, batch: int) -> float:
        """Share of training still ahead (at least 10%).

        By steps: ``1 - done / E(batch)``. Once that runs out without the target, by
        reward: the share of the reward gap (first return to target) still open.
        """
        by_steps = 1.0 - self.env_steps / progress.env_steps(batch)
        if by_steps > 0.1 or self.target_reward is None or self.last_return is None or self.first_return is None:
            return max(by_steps, 0.1)
        gap = self.target_reward - self.first_return
        if gap <= 0:
            return 0.1
        return min(max((self.target_reward - self.last_return) / gap, 0.1), 1.0)

    def refit(self) -> None:
        """Refit the performance model on the profile plus the run's recent iterations, so
        the predictions follow the machine as it is now (load from other jobs included)."""
        recent = self.run_observations[-self.recent_window :]
        if recent:
            perf = PerformanceModel._fit_once([*self.profile.observations, *recent])
            perf.fit_error = self.profile_perf.fit_error
            self.perf = perf
            self.cost = CostModel(self.perf, self.prices)

    def replan(self, current: RunShape) -> tuple[SearchOutcome, Candidate, Callable[[RunShape], Candidate]]:
        self.refit()
        full = self.progress_model()
        rest = full.scaled(self.remaining_fraction(full, current.batch))
        left = Constraints(
            None if self.constraints.deadline_s is None else max(self.constraints.deadline_s - self.spent_s, 1e-6),
            None if self.constraints.budget_usd is None else max(self.constraints.budget_usd - self.spent_usd, 1e-9),
        )
        cands = self._score(rest, self.space.shapes())
        outcome = choose(cands, self.objective, left)
        if outcome.best is None:  # mid-run infeasible: head for the best figure on what binds
            salvage = outcome.fastest if "deadline_s" in outcome.binding else outcome.cheapest
            outcome = SearchOutcome(
                salvage, False, outcome.binding, outcome.message + " (heading for the best achievable)",
                outcome.fastest, outcome.cheapest, outcome.front,
            )
        self.last_front = outcome.front

        def score(s: RunShape) -> Candidate:
            return self._score(rest, [s])[0]

        return outcome, score(current), score

    def objective_value(self, cand: Candidate) -> float:
        return objective_key(self.objective, self.last_front)(cand)

