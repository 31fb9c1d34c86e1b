"""What one pipeline configuration achieved: the figure every ingestion optimizer is told.

A configuration (:data:`Config`) maps knob names to integers. A :class:`Measurement` comes
from the live pipeline (:mod:`ingestion.measure`), the simulator (:mod:`ingestion.simulator`)
or a model, and says which in its ``label``.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Literal, Mapping

Config = dict[str, int]
MeasurementLabel = Literal["measured", "simulated", "modelled"]


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
    extra: Mapping[str, Any] = field(default_factory=dict)

    @property
    def score(self) -> float:
        """What optimizers maximise: throughput, with a failed configuration worth nothing."""
        return float("-inf") if self.failed else self.rows_per_s

    @property
    def cores(self) -> dict[str, float]:
        """The cores the measuring process kept busy (``cores_busy``) and those every other
        process kept busy meanwhile (``other_cores_busy``), where the measurement recorded
        them (``ingestion.measure``)."""
        return {k: float(self.extra[k]) for k in ("cores_busy", "other_cores_busy") if self.extra.get(k) is not None}




@dataclass(frozen=True)
class MeasureProtocol:
    """Warm-up, window and repeats of one measurement (seconds)."""

    warmup_s: float
    window_s: float
    repeats: int

    def as_kwargs(self) -> dict[str, Any]:
        return {"warmup_s": self.warmup_s, "window_s": self.window_s, "repeats": self.repeats}


#: How a search measures each trial: short, so a budget holds many.
SEARCH_PROTOCOL = MeasureProtocol(warmup_s=1.0, window_s=1.5, repeats=2)
#: How a chosen configuration is measured at the end: longer and repeated, the same for every optimizer.
FINAL_PROTOCOL = MeasureProtocol(warmup_s=4.0, window_s=3.0, repeats=3)
