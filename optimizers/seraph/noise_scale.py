"""The gradient noise scale B_simple = tr(Sigma) / |G|^2 (McCandlish et al. 2018).

The learner reports, per update, the squared norms of gradients measured at two batch
sizes: several minibatches of ``b_small`` samples and the full batch of ``b_big``.
Appendix A.1 of arXiv 1812.06162 gives unbiased estimates of the true gradient's
squared norm and of the trace of the per-sample covariance from those two sizes:

    |G|^2  ~ (b_big |G_big|^2 - b_small |G_small|^2) / (b_big - b_small)
    tr(S)  ~ (|G_small|^2 - |G_big|^2) / (1/b_small - 1/b_big)

Each estimate alone is noisy (|G|^2 can even come out negative), so, as the paper
recommends, we smooth numerator and denominator *separately* with an exponential
moving average and only then take their ratio.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Mapping, Sequence


@dataclass(frozen=True)
class NoiseSample:
    """One update's raw estimates: |G|^2 and tr(Sigma)."""

    g2: float
    trace: float

    @property
    def b_simple(self) -> float | None:
        return None if self.g2 <= 0 else self.trace / self.g2


def estimate(b_small: int, small_sqnorms: Sequence[float], b_big: int, big_sqnorm: float) -> NoiseSample:
    """Unbiased |G|^2 and tr(Sigma) from gradient norms at two batch sizes."""
    if not small_sqnorms:
        raise ValueError("need at least one small-batch gradient norm")
    if not 0 < b_small < b_big:
        raise ValueError(f"need 0 < b_small < b_big, got b_small={b_small}, b_big={b_big}")
    small = sum(float(x) for x in small_sqnorms) / len(small_sqnorms)
    big = float(big_sqnorm)
    g2 = (b_big * big - b_small * small) / (b_big - b_small)
    trace = (small - big) / (1.0 / b_small - 1.0 / b_big)
    return NoiseSample(g2=g2, trace=trace)


def sample_from_stats(grad_noise: Mapping[str, Any]) -> NoiseSample:
    """Decode the learner's ``stats["grad_noise"]`` dict into a :class:`NoiseSample`."""
    return estimate(
        int(grad_noise["b_small"]),
        [float(x) for x in grad_noise["small_sqnorms"]],
        int(grad_noise["b_big"]),
        float(grad_noise["big_sqnorm"]),
    )


@dataclass
class NoiseScaleTracker:
    """Exponentially smoothed B_simple, kept up to date during a run.

    ``alpha`` is the weight of the newest sample. Bias-corrected (as in Adam) so the
    first few samples are not pulled toward zero. ``floor``/``ceiling`` keep a wild
    early estimate from sending the planner to an absurd batch.
    """

    alpha: float = 0.2
    floor: float = 1.0
    ceiling: float = 1e7
    _g2: float = 0.0
    _trace: float = 0.0
    _weight: float = 0.0
    history: list[dict[str, float]] = field(default_factory=list)

    def update(self, sample: NoiseSample, *, env_steps: int = 0) -> float | None:
        a = self.alpha
        self._g2 = (1 - a) * self._g2 + a * sample.g2
        self._trace = (1 - a) * self._trace + a * sample.trace
        self._weight = (1 - a) * self._weight + a
        value = self.value
        self.history.append(
            {"env_steps": float(env_steps), "g2": sample.g2, "trace": sample.trace, "b_simple": value or float("nan")}
        )
        return value

    def update_from_stats(self, grad_noise: Mapping[str, Any], *, env_steps: int = 0) -> float | None:
        return self.update(sample_from_stats(grad_noise), env_steps=env_steps)

    @property
    def count(self) -> int:
        return len(self.history)

    @property
    def value(self) -> float | None:
        """Smoothed B_simple, or None before the smoothed |G|^2 is positive."""
        if self._weight == 0:
            return None
        g2 = self._g2 / self._weight
        trace = self._trace / self._weight
        if g2 <= 0 or trace <= 0:
            return None
        return min(max(trace / g2, self.floor), self.ceiling)
