"""The model re-fitted to the live measurements, and the models those measurements still allow.

A fit scales the prior model by factors: [all costs, per-call costs, then one per parallel
stage]. With few measurements only the level (the first factor: the machine's speed now) is
fitted; with more, every factor by coordinate descent on squared log error with a weak prior.
"""

from __future__ import annotations

import math
from dataclasses import replace

import numpy as np

from ingestion.measurement import Config
from ingestion.simulator import PipelineModel, simulate
from optimizers.intune.state import SearchSetup, SearchState

#: A floor on throughputs before taking a log (a configuration predicted or measured at zero).
FLOOR = 1e-9


def live_points(setup: SearchSetup, state: SearchState) -> list[tuple[Config, float]]:
    """The live measurements the model is fitted to, as (configuration, rows/s): those that ran,
    at most ``fit_points`` of them (the best half and the most recent half), so a long search
    costs the same per step."""
    limit = setup.settings.fit_points
    ran = [(k, m.rows_per_s) for k, m in state.visited.items() if not m.failed and m.rows_per_s > 0]
    if len(ran) > limit:
        best = sorted(ran, key=lambda kx: -kx[1])[: limit // 2]
        keys = {k for k, _ in best}
        ran = best + [kx for kx in ran if kx[0] not in keys][-(limit - len(best)):]
    return [(dict(k), x) for k, x in ran]


def scaled_model(prior: PipelineModel, factors: list[float]) -> PipelineModel:
    """``prior`` with ``factors``: [all costs, per-call costs, then one per parallel stage]."""
    parallel = [i for i, st in enumerate(prior.stages) if st.threads_knob]
    scale = [factors[0]] * len(prior.stages)
    for f, i in zip(factors[2:], parallel):
        scale[i] *= f
    return replace(prior, stages=tuple(
        replace(st, cpu_s_per_row=st.cpu_s_per_row * k, cpu_s_per_call=st.cpu_s_per_call * k * factors[1],
                wait_s_per_row=st.wait_s_per_row * k) for st, k in zip(prior.stages, scale)))


def fit_error(setup: SearchSetup, factors: list[float], points: list[tuple[Config, float]]) -> float:
    """Squared log error of the prior with ``factors`` over the live ``points``."""
    model = scaled_model(setup.prior, factors)
    return sum(math.log(max(simulate(model, c, setup.node).rows_per_s, FLOOR) / x) ** 2 for c, x in points)


def fit_rms(setup: SearchSetup, state: SearchState) -> float:
    """RMS log error of the current belief over the live measurements (inf with none)."""
    points = live_points(setup, state)
    if not points:
        return math.inf
    return math.sqrt(sum(math.log(max(simulate(state.belief, c, setup.node).rows_per_s, FLOOR) / x) ** 2
                         for c, x in points) / len(points))


def _clamped(setup: SearchSetup, factor: float) -> float:
    low, high = setup.settings.refit_range
    return min(high, max(low, factor))


def _fit_level(setup: SearchSetup, points: list[tuple[Config, float]], n_factors: int) -> list[float]:
    """The level only (one factor on every cost): two steps, since the hand-off costs are not
    scaled and a second step refines the first."""
    factors = [1.0] * n_factors
    for _ in range(2):
        model = scaled_model(setup.prior, factors)
        ratio = float(np.mean([math.log(max(simulate(model, c, setup.node).rows_per_s, FLOOR) / x)
                               for c, x in points]))
        factors[0] = _clamped(setup, factors[0] * math.exp(ratio))
    return factors


def _fit_all(setup: SearchSetup, state: SearchState, points: list[tuple[Config, float]], n_factors: int) -> list[float]:
    """Every factor by coordinate descent: the first fit tries ``refit_values`` in
    ``refit_passes`` passes; later ones start from the last fit and try ``refit_steps`` around it
    in one pass (one new point moves it a little)."""
    s = setup.settings

    def loss(fs: list[float]) -> float:
        return fit_error(setup, fs, points) + s.refit_prior_weight * sum(math.log(f) ** 2 for f in fs)

    factors = [1.0] * n_factors
    warm = len(state.refit_factors) == n_factors and len(points) > s.level_only_below
    if warm:
        factors = list(state.refit_factors)
    best = loss(factors)
    for _ in range(1 if warm else s.refit_passes):
        for d in range(len(factors)):
            values = [factors[d] * r for r in s.refit_steps] if warm else s.refit_values
            for f in values:
                trial = factors[:d] + [_clamped(setup, f)] + factors[d + 1:]
                value = loss(trial)
                if value < best - 1e-12:
                    best, factors = value, trial
    return factors


def refit(setup: SearchSetup, state: SearchState) -> None:
    """Re-fit the belief to the live measurements (the level only while fewer than
    ``level_only_below`` ran); nothing when ``refit`` is off or nothing ran."""
    points = live_points(setup, state)
    if not points or not setup.settings.refit:
        return
    n_factors = 2 + sum(1 for st in setup.prior.stages if st.threads_knob)
    if len(points) < setup.settings.level_only_below:
        factors = _fit_level(setup, points, n_factors)
    else:
        factors = _fit_all(setup, state, points, n_factors)
    state.set_belief(scaled_model(setup.prior, factors), factors)


def plausible_models(setup: SearchSetup, state: SearchState) -> list[PipelineModel]:
    """The re-fitted model and, per cost factor but the global one, that factor pushed as far
    down and as far up (by up to ``escape_stretch``) as the live measurements allow: the fit's
    squared log error may grow by at most ``escape_slack`` per point. A stage that was never the
    bottleneck in any measurement keeps a wide range, one that was is pinned by the data."""
    if not state.refit_factors:
        return [state.belief]
    points = live_points(setup, state)
    fitted = list(state.refit_factors)
    allowed = fit_error(setup, fitted, points) + setup.settings.escape_slack * len(points)
    models = [state.belief]
    for d in range(1, len(fitted)):
        for direction in (-1, 1):
            furthest = None
            for stretch in setup.settings.escape_stretch:
                trial = fitted[:d] + [fitted[d] * (1.0 + direction * stretch)] + fitted[d + 1:]
                if fit_error(setup, trial, points) > allowed:
                    break
                furthest = trial
            if furthest is not None:
                models.append(scaled_model(setup.prior, furthest))
    return models
