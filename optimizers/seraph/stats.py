"""Statistics behind the planner and the benchmarks, on scipy: the progress-curve fit
(``least_squares``), the rank-sum tests that decide whether a measured difference between
reference runs is used (``mannwhitneyu``), and bootstrap resampling (``bootstrap``): an
interval of a mean, sum or median over seeds, and the paired resamples the online layout
decision bounds its ratio with."""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass
from typing import Any, Callable, Sequence

import numpy as np
from scipy.optimize import least_squares
from scipy.stats import bootstrap, mannwhitneyu

from optimizers.seraph.reference_points import Reference


def fit_progress(points: Sequence[tuple[int, float]]) -> tuple[float, float]:
    """(E_min, B_noise) of ``E(B) = E_min (1 + B / B_noise)`` fitted to measured points:
    least squares on log E (``scipy.optimize.least_squares``, trust-region reflective) over
    ``log E_min`` and ``log B_noise``, with B_noise held within [1, 1e7] (a flat or falling
    curve puts it at 1e7: no batch is too large)."""
    b = np.array([p[0] for p in points], dtype=float)
    log_e = np.log([p[1] for p in points])
    start = (float(log_e.min()), float(np.clip(np.log(np.median(b)), 0.0, _LOG_BN_MAX)))
    fit = least_squares(lambda x: x[0] + np.log1p(b / np.exp(x[1])) - log_e, start,
                        bounds=([-np.inf, 0.0], [np.inf, _LOG_BN_MAX]))
    return float(np.exp(fit.x[0])), float(np.exp(fit.x[1]))


_LOG_BN_MAX = 7 * math.log(10)  # B_noise at most 1e7


#: The statistics :func:`bootstrap_interval` takes by name (numpy's, vectorised along an axis).
INTERVAL_STATISTICS: dict[str, Callable[..., Any]] = {"mean": np.mean, "sum": np.sum, "median": np.median}


@dataclass(frozen=True)
class Interval:
    """A statistic of some values with its bootstrap confidence interval (``low``/``high``
    None when there is no interval to draw: fewer than two values)."""

    statistic: str
    estimate: float
    low: float | None
    high: float | None
    confidence: float
    n: int  # values the statistic is over (seeds, runs)
    resamples: int
    method: str  # scipy's: "BCa", "percentile", "basic"; "none" without an interval

    def to_dict(self) -> dict[str, float | int | str | None]:
        return asdict(self)


def bootstrap_interval(values: Sequence[float], statistic: str = "mean", *, confidence: float = 0.95,
                       resamples: int = 9999, seed: int = 0, method: str = "BCa") -> Interval:
    """``statistic`` ("mean", "sum" or "median") of ``values`` and its two-sided bootstrap
    interval at ``confidence`` (``scipy.stats.bootstrap``; BCa by default, as scipy's).

    For "sums and means over seeds": each value is one seed's figure. Fewer than two values
    give no interval; values that are all equal give the point as both ends (every resample
    is that value)."""
    fn = INTERVAL_STATISTICS.get(statistic)
    if fn is None:
        raise ValueError(f"statistic {statistic!r} is not one of {', '.join(INTERVAL_STATISTICS)}")
    x = np.asarray(values, dtype=float)
    if x.ndim != 1 or x.size == 0 or not np.all(np.isfinite(x)):
        raise ValueError(f"bootstrap_interval needs one or more finite numbers, got {list(values)!r}")
    estimate = float(fn(x))
    if x.size < 2:
        return Interval(statistic, estimate, None, None, confidence, 1, 0, "none")
    if np.ptp(x) == 0:
        return Interval(statistic, estimate, estimate, estimate, confidence, int(x.size), 0, "none")
    res = bootstrap((x,), fn, n_resamples=resamples, confidence_level=confidence, method=method,
                    rng=np.random.default_rng(seed), vectorized=True)
    ci = res.confidence_interval
    return Interval(statistic, estimate, float(ci.low), float(ci.high), confidence, int(x.size), resamples, method)


def paired_bootstrap(columns: Sequence[Sequence[float]], statistic: Callable[..., np.ndarray], *,
                     resamples: int, seed: int) -> np.ndarray:
    """``statistic`` over ``resamples`` resamples of the rows of ``columns`` (paired: one
    index draw picks a row of every column), sorted (``scipy.stats.bootstrap``'s
    distribution). ``statistic(*columns, axis=-1)`` is vectorised and may return inf (its
    own "no evidence"); one row is its own only resample."""
    data = tuple(np.asarray(c, dtype=float) for c in columns)
    if len(data[0]) < 2:
        return np.full(resamples, float(statistic(*data, axis=-1)))
    with np.errstate(invalid="ignore"):  # scipy's interval (unused here) interpolates between inf draws
        res = bootstrap(data, statistic, n_resamples=resamples, paired=True, vectorized=True,
                        method="percentile", rng=np.random.default_rng(seed))
    return np.sort(res.bootstrap_distribution)


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
