"""What one pipeline configuration achieved: the figure every ingestion optimizer is told.

A configuration (:data:`Config`) maps knob names to integers. A :class:`Measurement` comes
from the live pipeline (:mod:`ingestion.measure`), the simulator (:mod:`ingestion.simulator`)
or a model, and says which in its ``label``.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Literal, Sequence, TypedDict

Config = dict[str, int]
MeasurementLabel = Literal["measured", "simulated", "modelled"]


class SimulatedStage(TypedDict):
    """One stage as the simulator sees it: its server, threads, capacity, load and memory."""

    threads: float
    server: str
    capacity_rows_per_s: float
    utilisation: float
    memory_mb: float


class Cores(TypedDict, total=False):
    """The cores the measuring process kept busy, and those every other process kept busy meanwhile."""

    cores_busy: float
    other_cores_busy: float


class MeasurementExtra(TypedDict, total=False):
    """A measurement's own figures beside rows/s, by where it came from; every key optional."""

    # the live pipeline's (ingestion.measure.measure_in_process)
    windows_rows_per_s: list[float]
    spread: float  # (max - min) / median of the windows
    rows: int
    elapsed_s: float
    cores_busy: float  # cores the measuring process kept busy
    other_cores_busy: float | None  # cores every other process kept busy meanwhile
    startup_s: float
    rss_before_mb: float
    pipeline_rss_mb: float
    warmup_s: float
    window_s: float
    repeats: int
    stage_rows_per_s: dict[str, float]  # per stage prefix, with a stage profile
    stage_cores_busy: dict[str, float]
    # a failed configuration's
    failure: str  # why it failed: out of memory, a hung or dead worker, a pipeline error
    config: Config
    # the simulator's
    stages: dict[str, SimulatedStage]
    bottleneck: str
    memory_fraction: float
    cpu_share_per_thread: float
    model: str
    node: str
    # InTune's mean of several measurements of one configuration
    samples: list[float]


@dataclass(frozen=True)
class Measurement:
    """What one configuration achieved. ``label`` says whether it was measured on the
    real pipeline, simulated or modelled; the figures are never mixed silently. ``failed``: the
    configuration did not run (out of memory, a hung or dead measuring worker, a pipeline
    error; ``extra["failure"]`` says which when known), and its rows/s count for nothing."""

    rows_per_s: float
    peak_rss_mb: float = 0.0
    failed: bool = False
    label: MeasurementLabel = "measured"
    extra: MeasurementExtra = field(default_factory=lambda: MeasurementExtra())

    @property
    def score(self) -> float:
        """What optimizers maximise: throughput, with a failed configuration worth nothing."""
        return float("-inf") if self.failed else self.rows_per_s

    @property
    def cores(self) -> Cores:
        """The cores the measuring process kept busy (``cores_busy``) and those every other
        process kept busy meanwhile (``other_cores_busy``), where the measurement recorded
        them (``ingestion.measure``)."""
        cores, busy, others = Cores(), self.extra.get("cores_busy"), self.extra.get("other_cores_busy")
        if busy is not None:
            cores["cores_busy"] = float(busy)
        if others is not None:
            cores["other_cores_busy"] = float(others)
        return cores


@dataclass(frozen=True)
class PairedRatio:
    """How much faster ``a`` ran than ``b`` over measurements taken in pairs (each pair side by
    side in time, so a drift of the machine's speed hits both alike): ``ratio`` is the geometric
    mean of the pairs' ratios, ``low`` and ``high`` its ``confidence`` interval (a percentile
    bootstrap over the pairs; with one pair, or pairs that all agree, the interval is that
    ratio), ``pairs`` how many pairs it rests on."""

    ratio: float
    low: float
    high: float
    confidence: float
    pairs: int

    def excludes(self, value: float = 1.0) -> bool:
        """Whether the interval lies wholly on one side of ``value`` (1.0: a tie)."""
        return self.low > value or self.high < value


def paired_ratio(a: Sequence[float], b: Sequence[float], *, confidence: float = 0.9, seed: int = 0,
                 resamples: int = 2000) -> PairedRatio:
    """The :class:`PairedRatio` of ``a`` over ``b`` (equal lengths, every value positive)."""
    if len(a) != len(b) or not a:
        raise ValueError(f"paired_ratio needs two equally long, non-empty samples, got {len(a)} and {len(b)}")
    import numpy as np

    logs = np.log(np.maximum(np.asarray(a, float), 1e-12)) - np.log(np.maximum(np.asarray(b, float), 1e-12))
    centre = float(np.mean(logs))
    if len(logs) < 2 or float(np.ptp(logs)) == 0.0:
        return PairedRatio(math.exp(centre), math.exp(centre), math.exp(centre), confidence, len(logs))
    from scipy.stats import bootstrap

    res = bootstrap((logs,), np.mean, confidence_level=confidence, n_resamples=resamples, method="percentile",
                    random_state=np.random.default_rng(seed))
    low, high = float(res.confidence_interval.low), float(res.confidence_interval.high)
    return PairedRatio(math.exp(centre), math.exp(min(low, centre)), math.exp(max(high, centre)), confidence, len(logs))


@dataclass(frozen=True)
class MeasureProtocol:
    """Warm-up, window and repeats of one measurement (seconds)."""

    warmup_s: float
    window_s: float
    repeats: int

    def as_kwargs(self) -> dict[str, float | int]:
        return {"warmup_s": self.warmup_s, "window_s": self.window_s, "repeats": self.repeats}


#: How a search measures each trial: short, so a budget holds many.
SEARCH_PROTOCOL = MeasureProtocol(warmup_s=1.0, window_s=1.5, repeats=2)
#: How a chosen configuration is measured at the end: longer and repeated, the same for every optimizer.
FINAL_PROTOCOL = MeasureProtocol(warmup_s=4.0, window_s=3.0, repeats=3)
