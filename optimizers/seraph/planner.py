"""From a profile to a plan, and re-planning during the run.

:class:`Planner` fits the performance and cost models to a profile, turns the noise
scale into steps-to-target with :class:`~optimizers.seraph.models.ProgressModel`,
scores every shape of the search space, and picks one for the objective under the
constraints. During training it is also the controller's :class:`Replanner`: it
takes in each iteration record (new noise-scale measurements, progress, spend) and
plans the *rest* of training under what is left of the deadline and budget.

Where steps-to-target come from. The noise scale fixes the *shape* of the
steps-vs-batch curve, not its scale: ``E(B) = E_min (1 + B / B_noise)`` needs one
point. We take it from a :class:`~optimizers.seraph.reference_points.Reference` (env
steps to the target at one or more batches; :func:`~optimizers.seraph.reference_points.reference_for`
says where they come from). The run corrects it: once the steps already spent
pass the estimate without reaching the target, the rest is re-estimated from the
reward still missing (see :meth:`Planner.remaining_fraction`).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field, replace
from typing import Any, Callable, Sequence

import numpy as np

from core.json_edge import JsonObject
from optimizers.seraph.layout import LayoutChoice
from optimizers.seraph.do_no_harm import MODEL_ERROR_CAP, BaselineVerdict, MemoryVerdict, keep_baseline_unless_saving, keep_measured_memory
from optimizers.seraph.models import CostModel, Observation, PerformanceModel, Prices, ProgressModel
from optimizers.seraph.noise_scale import NoiseScaleTracker
from optimizers.seraph.objectives import Objective
from optimizers.seraph.workload_profile import Profile
from optimizers.seraph.pilot import BASE_MEMORY_MB as PILOT_MEMORY_MB
from optimizers.seraph.reference_points import Reference
from optimizers.seraph.search import Candidate, Constraints, SearchOutcome, choose, front_scale, score_shapes
from optimizers.seraph.space import SearchSpace
from optimizers.seraph.stats import ACTOR_FACTOR_P, fit_progress, rank_sum_p, tie_pooled_points
from serverless.slots import slot_count
from serverless.run_shape import RunShape

@dataclass(frozen=True)
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
    noise: JsonObject = field(default_factory=dict)  # the noise scale's report (Planner.noise_report), for the JSON
    verdict: BaselineVerdict | None = None  # the baseline and whether the plan kept it
    memory_verdict: MemoryVerdict | None = None  # a probed memory size against the pilot's (do_no_harm)
    layout: LayoutChoice | None = None  # the rollout layout chosen before the pilot, and why

    @property
    def shape(self) -> RunShape | None:
        return None if self.outcome.best is None else self.outcome.best.shape

    @property
    def steps_per_env(self) -> int | None:
        return None if self.outcome.best is None else self.outcome.best.steps_per_env

    def as_dict(self) -> JsonObject:
        best = self.outcome.best
        return {
            "objective": self.objective.name,
            "weight": self.objective.weight_or_none(),
            "constraints": self.constraints.as_dict(),
            "feasible": self.outcome.feasible,
            "binding": self.outcome.binding,
            "message": self.outcome.message,
            "config": None if best is None else best.shape.to_dict(),
            "steps_per_env": None if best is None else best.steps_per_env,  # the layout's env length
            "baseline": None if self.verdict is None else self.verdict.as_dict(),
            "memory_rule": None if self.memory_verdict is None else self.memory_verdict.as_dict(),
            "layout": None if self.layout is None else self.layout.as_dict(),
            "references": "none" if self.layout is None else self.layout.references,
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
    """The scalar ``objective`` minimises, on the scale of ``front``."""
    scale = front_scale(front)
    return lambda c: objective.value(c.cost_usd, c.time_s, scale)


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
    baseline: RunShape | None = None  # always a candidate (optimizers.seraph.do_no_harm)
    baseline_env_steps: float | None = None  # measured at the baseline's layout (median of its reference runs)
    layout: LayoutChoice | None = None  # the layout choice the plan reports
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

    def noise_report(self) -> JsonObject:
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
            shapes, self.perf.iteration_s, self.cost.iteration_cost, lambda s: self.env_steps_to_target(progress, s),
            self.steps_per_env,
        )

    def baseline_candidate(self, progress: ProgressModel) -> Candidate | None:
        """The baseline scored like any shape. At the run's layout its env steps come from the
        progress model like every other shape's; at another layout from its own reference runs
        (measured median), else from the progress model at its batch plus its detection lag."""
        b = self.baseline
        if b is None:
            return None
        shape = replace(b.without_layout(), memory_mb=self._nearest_level(b.memory_mb))
        if b.steps_per_env == self.steps_per_env:
            return self._score(progress, [shape])[0]
        steps = self.baseline_env_steps
        if steps is None:
            steps = progress.env_steps(b.batch) + slot_count(b.batch, b.actors, b.steps_per_env) * self.episode_steps
        return score_shapes([shape], self.perf.iteration_s, self.cost.iteration_cost, lambda s: steps, b.steps_per_env)[0]

    def _nearest_level(self, memory_mb: int) -> int:
        levels = list(self.perf.memory_levels)
        return memory_mb if memory_mb in levels else min(levels, key=lambda m: abs(m - memory_mb))

    def model_error(self) -> float | None:
        """The performance model's measured error on this workload: the leave-one-out median
        relative error of the predicted iteration time over the profile (else in sample),
        capped at :data:`~optimizers.seraph.do_no_harm.MODEL_ERROR_CAP` (the raw figures are
        in the plan's ``performance_model.fit_error``)."""
        fe = self.profile_perf.fit_error
        error = fe.get("iteration_s_mdape_leave_one_out", fe.get("iteration_s_mdape_in_sample"))
        return None if error is None else min(float(error), MODEL_ERROR_CAP)

    def plan(self) -> Plan:
        """Plan the whole run from the profile: the best candidate for the objective, the
        baseline always among them and kept unless the best saves more than the model's error."""
        progress = self.progress_model()
        cands = self._score(progress, self.space.shapes())
        base = self.baseline_candidate(progress)
        if base is not None and not any(c.shape == base.shape and c.steps_per_env == base.steps_per_env for c in cands):
            cands.append(base)
        outcome = choose(cands, self.objective, self.constraints)
        verdict = None
        if base is not None:
            outcome, verdict = keep_baseline_unless_saving(outcome, base, self.objective, self.constraints, self.model_error())
        memory_verdict = None
        if verdict is None or verdict.chosen != "baseline":  # a kept baseline runs as configured
            outcome, memory_verdict = keep_measured_memory(
                outcome, cands, self.objective, self.constraints, self.model_error(), PILOT_MEMORY_MB
            )
        self.last_front = outcome.front
        best = outcome.best
        return Plan(
            self.objective, self.constraints, outcome, progress, self.reference, self.perf, self.prices, self.space, cands,
            iteration_s=None if best is None else self.perf.iteration_s(best.shape),
            iteration_cost_usd=None if best is None else self.cost.iteration_cost(best.shape),
            noise=self.noise_report(), verdict=verdict, layout=self.layout, memory_verdict=memory_verdict,
        )

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

