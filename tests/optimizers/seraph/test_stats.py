"""The planner's and the benchmarks' statistics on scipy: the progress-curve fit against the
701-point log grid it replaced, the bootstrap interval over seeds, and the paired resamples."""

from __future__ import annotations

import math

import numpy as np
import pytest

from benchmarks.scipy_statistics import grid_fit_progress, sse  # the 701-point grid fit_progress replaced
from optimizers.seraph.stats import Interval, bootstrap_interval, fit_progress, paired_bootstrap


def test_the_fit_matches_the_grid_on_every_measured_reference_and_beats_it_on_random_curves() -> None:
    measured = [  # the references' medians (optimizers/seraph/data), the built-in CartPole points
        [(512, 24576.0), (1024, 29184.0), (2048, 52224.0), (4000, 98000.0)],
        [(2048, 212992.0), (4096, 421888.0), (16384, 901120.0)],
        [(1024, 54784.0), (2048, 57344.0), (4000, 74000.0), (4096, 77824.0), (8192, 122880.0), (16384, 212992.0)],
        [(512, 21504.0), (1024, 19456.0), (2048, 51200.0), (4000, 90000.0)],
        [(256, 28_160.0), (1024, 28_672.0), (4000, 144_000.0)],
    ]
    for pts in measured:
        (e_grid, bn_grid), (e_fit, bn_fit) = grid_fit_progress(pts), fit_progress(pts)
        assert bn_fit == pytest.approx(bn_grid, rel=0.02) and e_fit == pytest.approx(e_grid, rel=0.02)
    rng = np.random.default_rng(0)
    for _ in range(60):
        batches = sorted(int(b) for b in rng.choice([256, 512, 1024, 2048, 4096, 8192, 16384], rng.integers(2, 6), replace=False))
        bn, e_min = 10 ** rng.uniform(1, 6), 10 ** rng.uniform(3, 6)
        pts = [(b, e_min * (1 + b / bn) * math.exp(rng.normal(0, 0.3))) for b in batches]
        assert sse(pts, *fit_progress(pts)) <= sse(pts, *grid_fit_progress(pts)) + 1e-9


def test_a_flat_or_falling_curve_puts_the_noise_scale_at_its_bound() -> None:
    for pts in ([(256, 30_000.0), (1024, 29_000.0)], [(256, 40_000.0), (1024, 30_000.0), (4096, 20_000.0)]):
        assert fit_progress(pts)[1] == pytest.approx(1e7, rel=1e-3)


def test_the_interval_of_a_mean_over_seeds_is_scipys_and_holds_the_mean() -> None:
    from scipy.stats import bootstrap

    values = [1.0, 1.4, 0.9, 2.2, 1.1]
    got = bootstrap_interval(values, "mean", seed=3)
    ref = bootstrap((np.array(values),), np.mean, rng=np.random.default_rng(3), vectorized=True).confidence_interval
    assert isinstance(got, Interval) and got.estimate == pytest.approx(np.mean(values))
    assert (got.low, got.high) == (pytest.approx(ref.low), pytest.approx(ref.high))
    assert got.low < got.estimate < got.high and (got.n, got.confidence, got.method) == (5, 0.95, "BCa")
    assert bootstrap_interval(values, "mean", seed=3) == got  # the seed fixes the resamples


def test_the_interval_of_a_sum_is_n_times_the_mean_s_and_wider_confidence_is_wider() -> None:
    values = [3.0, 5.0, 4.0, 9.0, 4.5, 6.0]
    mean, total = bootstrap_interval(values, "mean"), bootstrap_interval(values, "sum")
    assert total.estimate == pytest.approx(sum(values))
    assert total.low == pytest.approx(6 * mean.low) and total.high == pytest.approx(6 * mean.high)
    narrow = bootstrap_interval(values, "mean", confidence=0.5)
    assert mean.low < narrow.low < narrow.high < mean.high
    median = bootstrap_interval(values, "median", method="percentile")
    assert median.estimate == 4.75 and min(values) <= median.low <= median.high <= max(values)


def test_one_value_has_no_interval_and_equal_values_a_point() -> None:
    one = bootstrap_interval([2.5], "sum")
    assert (one.estimate, one.low, one.high, one.method) == (2.5, None, None, "none")
    assert one.to_dict()["low"] is None
    same = bootstrap_interval([2.0, 2.0, 2.0], "mean")
    assert (same.low, same.estimate, same.high) == (2.0, 2.0, 2.0)


@pytest.mark.parametrize("values, statistic, match", [
    ([], "mean", "one or more finite numbers"),
    ([1.0, math.nan], "mean", "one or more finite numbers"),
    ([1.0, 2.0], "max", "statistic 'max' is not one of mean, sum, median"),
])
def test_bad_input_is_named(values: list[float], statistic: str, match: str) -> None:
    with pytest.raises(ValueError, match=match):
        bootstrap_interval(values, statistic)


def test_paired_resamples_draw_whole_rows_and_keep_inf() -> None:
    a, b = [1.0, 2.0, 3.0, 4.0], [10.0, 20.0, 30.0, 40.0]

    def ratio(x: np.ndarray, y: np.ndarray, axis: int = -1) -> np.ndarray:
        return y.sum(axis=axis) / x.sum(axis=axis)

    draws = paired_bootstrap([a, b], ratio, resamples=200, seed=1)
    assert draws.shape == (200,) and np.allclose(draws, 10.0)  # paired: every row keeps its ratio

    def no_evidence(x: np.ndarray, axis: int = -1) -> np.ndarray:
        s = x.sum(axis=axis)
        return np.where(s > 9, np.inf, s)

    draws = paired_bootstrap([a], no_evidence, resamples=300, seed=2)
    assert np.all(np.diff(draws[np.isfinite(draws)]) >= 0) and np.isinf(draws[-1]) and np.isfinite(draws[0])
    assert np.array_equal(paired_bootstrap([[5.0]], no_evidence, resamples=3, seed=0), [5.0, 5.0, 5.0])


def test_the_layout_bootstrap_draws_what_the_loop_it_replaced_drew() -> None:
    """scipy's paired bootstrap takes its resamples from the same generator calls as the loop of
    ``rng.integers`` it replaced: the same draws (to rounding of the sums), the same bound."""
    from benchmarks.scipy_statistics import loop_bootstrap_draws
    from optimizers.seraph.online_layout import OnlineLayoutSettings, bootstrap_draws

    rng = np.random.default_rng(5)
    units = [{"var_env": float(rng.uniform(0.5, 1.5)), "var_chunk": float(rng.uniform(1, 5)),
              "signal": float(rng.normal(1.0, 0.8)), "bias": float(rng.uniform(0, 0.05))} for _ in range(12)]
    draws = OnlineLayoutSettings().bootstrap_draws
    for seed in range(5):
        before = np.array(loop_bootstrap_draws(units, 4, 4, seed, draws))
        after = np.array(bootstrap_draws(units, 4, 4, seed))
        assert np.array_equal(np.isinf(before), np.isinf(after))
        assert np.allclose(after[np.isfinite(after)], before[np.isfinite(before)], rtol=1e-12)
