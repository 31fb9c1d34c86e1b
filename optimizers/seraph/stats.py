"""Statistics behind the planner: the progress-curve fit and the rank-sum tests that
decide whether a measured difference between reference runs is used."""

from __future__ import annotations

import math
from typing import Sequence

import numpy as np
from scipy.stats import mannwhitneyu

from optimizers.seraph.reference_points import Reference


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


ACTOR_FACTOR_P = 0.05  # the conventional level; not tuned


def rank_sum_p(x: Sequence[float], y: Sequence[float]) -> float:
    """Two-sided p-value of the Mann-Whitney rank-sum test of ``x`` against ``y``
    (``scipy.stats.mannwhitneyu``, normal approximation with continuity correction)."""
    return float(mannwhitneyu(x, y, alternative="two-sided", method="asymptotic").pvalue)


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
