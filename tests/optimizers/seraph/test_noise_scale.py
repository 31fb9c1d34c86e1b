"""The noise-scale estimator on a synthetic problem whose B_simple is known exactly."""

import numpy as np
import pytest

from optimizers.seraph.noise_scale import NoiseScaleTracker, estimate


def _synthetic_norms(rng, G, sd, b_small, b_big, n_small):
    """Squared norms of minibatch-mean gradients: per-sample grad = G + N(0, diag(sd^2))."""
    big = rng.normal(G, sd, size=(b_big, G.size))
    smalls = [big[i * b_small : (i + 1) * b_small].mean(0) for i in range(n_small)]
    return [float(s @ s) for s in smalls], float(big.mean(0) @ big.mean(0))


@pytest.mark.parametrize("scale", [0.5, 1.5])
def test_tracker_recovers_known_noise_scale(scale):
    rng = np.random.default_rng(0)
    G = np.linspace(0.1, 1.0, 20) * 0.1
    sd = np.full(20, scale)
    true_b = float((sd**2).sum() / (G @ G))  # tr(Sigma) / |G|^2
    tracker = NoiseScaleTracker(alpha=0.05)
    for _ in range(400):
        small, big = _synthetic_norms(rng, G, sd, 64, 2048, 16)
        tracker.update(estimate(64, small, 2048, big))
    assert tracker.value == pytest.approx(true_b, rel=0.2)


def test_estimates_are_unbiased_in_expectation():
    rng = np.random.default_rng(1)
    G = np.full(5, 0.3)
    sd = np.full(5, 1.0)
    g2s, traces = [], []
    for _ in range(2000):
        small, big = _synthetic_norms(rng, G, sd, 32, 512, 8)
        s = estimate(32, small, 512, big)
        g2s.append(s.g2)
        traces.append(s.trace)
    assert np.mean(g2s) == pytest.approx(float(G @ G), rel=0.1)
    assert np.mean(traces) == pytest.approx(float((sd**2).sum()), rel=0.05)


def test_bad_batch_sizes_are_rejected():
    with pytest.raises(ValueError):
        estimate(64, [1.0], 64, 1.0)
    with pytest.raises(ValueError):
        estimate(8, [], 64, 1.0)


def test_tracker_has_no_value_before_a_positive_gradient_estimate():
    t = NoiseScaleTracker()
    assert t.value is None
    from optimizers.seraph.noise_scale import NoiseSample

    t.update(NoiseSample(g2=-1.0, trace=5.0))
    assert t.value is None
    t.update(NoiseSample(g2=10.0, trace=5.0))
    assert t.value is not None and t.value > 0
