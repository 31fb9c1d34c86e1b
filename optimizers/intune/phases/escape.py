"""On a stall: an escape several moves away, or, while InTune is not sure, an exploration.

One move at a time can miss a better configuration that needs several moves whose single
steps each measure worse; the measurements so far say which model errors are still possible
(:func:`~optimizers.intune.phases.model_fit.plausible_models`), and an escape tries the most
promising configuration under them.
"""

from __future__ import annotations

import numpy as np

from ingestion.measurement import Config
from ingestion.simulator import simulate
from optimizers.intune.env import STOP, Masker
from optimizers.intune.phases.model_fit import FLOOR, fit_rms, plausible_models
from optimizers.intune.state import SearchSetup, SearchState


def within_moves(masker: Masker, base: Config, depth: int) -> list[Config]:
    """Every valid, memory-safe configuration at most ``depth`` moves from ``base`` (not base)."""
    seen = {Masker.key(base)}
    frontier, found = [base], []
    for _ in range(depth):
        following = []
        for config in frontier:
            for i, target in enumerate(masker.targets(config)):
                if target is None or i == STOP or Masker.key(target) in seen:
                    continue
                seen.add(Masker.key(target))
                following.append(target)
        found += following
        frontier = following
    return found


def escape(setup: SearchSetup, state: SearchState, best: Config | None) -> Config | None:
    """The unmeasured configuration within ``escape_depth`` moves of ``best`` (the best measured
    one) with the largest predicted gain over it under any plausible model, if that gain is above
    ``min_gain`` and fewer than ``max_escapes`` escapes were taken."""
    s = setup.settings
    if state.escapes >= s.max_escapes or best is None:
        return None
    candidates = [c for c in within_moves(state.masker, best, s.escape_depth) if Masker.key(c) not in state.visited]
    if not candidates:
        return None
    gains = np.zeros(len(candidates))
    for model in plausible_models(setup, state):
        base_x = max(simulate(model, best, setup.node).rows_per_s, FLOOR)
        predicted = np.array([simulate(model, c, setup.node).score for c in candidates])
        gains = np.maximum(gains, predicted / base_x)
    best_i = int(np.argmax(gains))
    if gains[best_i] <= 1.0 + s.min_gain:
        return None
    state.escapes += 1
    return candidates[best_i]


def explore_candidates(setup: SearchSetup, state: SearchState) -> list[Config]:
    """Unmeasured configurations the masks allow: the whole grid up to ``explore_grid``
    configurations, else those within ``escape_depth`` moves of the ``explore_bases`` best measured."""
    s = setup.settings
    if setup.space.grid_size() <= s.explore_grid:
        pool = [c for c in setup.space.grid() if state.masker.safe(c)]
    else:
        pool = [c for k, _ in state.ranked()[: s.explore_bases] for c in within_moves(state.masker, dict(k), s.escape_depth)]
    seen: set[tuple] = set()
    out = []
    for c in pool:
        key = Masker.key(c)
        if key not in state.visited and key not in seen:
            seen.add(key)
            out.append(c)
    return out


def explore(setup: SearchSetup, state: SearchState, best: Config | None) -> Config | None:
    """Unless InTune is sure, the unmeasured configuration with the largest optimistic gain over
    ``best`` (the largest under any plausible model, after the failure penalty). Sure means: the
    re-fitted model fits the live measurements within ``sure_error`` RMS log error and no
    candidate may gain ``min_gain``. While it is not sure it keeps measuring, until its budget
    ends the search."""
    s = setup.settings
    candidates = explore_candidates(setup, state)
    if best is None or not candidates:
        return None
    models = plausible_models(setup, state)
    prior = np.array([simulate(state.belief, c, setup.node).score for c in candidates])
    shortlist = [candidates[i] for i in np.argsort(-prior)[: s.explore_shortlist]]
    gains = np.zeros(len(shortlist))
    for model in models:
        base_x = max(simulate(model, best, setup.node).rows_per_s, FLOOR)
        gains = np.maximum(gains, np.array([simulate(model, c, setup.node).score for c in shortlist]) / base_x)
    penalty = np.array([s.failure_penalty if state.failures.predicted(c) else 1.0 for c in shortlist])
    gains = gains * penalty
    top = int(np.argmax(gains))
    if gains[top] <= 1.0 + s.min_gain and fit_rms(setup, state) <= s.sure_error:
        return None
    state.explorations += 1
    return shortlist[top]
