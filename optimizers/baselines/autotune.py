"""The real tf.data AUTOTUNE baseline.

Every knob tf.data can tune itself (parallelism, cycle length, prefetch depth; see
``PipelineSpec.autotune_knobs``) is set to ``tf.data.AUTOTUNE`` (-1) and the pipeline
runs with tf.data's default options (autotune on, default private thread pool, default
RAM budget). Knobs AUTOTUNE cannot set (batch size, shuffle buffer) keep the space's
defaults, as a user would write them. Nothing is searched: tf.data's runtime model
tunes the running pipeline, so this optimizer measures one configuration.

:func:`compare_with_autotune` measures another optimizer's pick against this configuration in the
same worker, interleaved (what ``trainwise ingest tune`` reports as ``vs_autotune``).
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Callable

from core.json_edge import JsonObject
from ingestion.knobs import Config
from ingestion.measurement import Measurement, MeasureProtocol, paired_ratio
from ingestion.pipeline import PipelineSpec
from optimizers.baselines._fixed import FixedConfigs

AUTOTUNE = -1  # == tf.data.AUTOTUNE


def autotune_config(spec: PipelineSpec) -> Config:
    tunable = set(spec.autotune_knobs())
    return {k.name: (AUTOTUNE if k.name in tunable else k.initial) for k in spec.space.knobs}


def make_autotune_optimizer(spec: PipelineSpec) -> FixedConfigs:
    return FixedConfigs("autotune", [autotune_config(spec)])


#: How the pick and AUTOTUNE are measured when compared side by side: AUTOTUNE's own warm-up as
#: long as the final protocol's (its runtime model tunes the running pipeline first), two windows.
COMPARE_PROTOCOL = MeasureProtocol(warmup_s=4.0, window_s=2.0, repeats=2)


@dataclass(frozen=True)
class AutotuneComparison:
    """A pick against tf.data AUTOTUNE on the same pipeline, measured in the same worker,
    interleaved: ``rounds`` rounds of one measurement each, the order alternating (pick first,
    then AUTOTUNE first, ...), so a drift of the machine's speed hits both alike. ``vs_autotune``
    is the geometric mean of the rounds' ratios (pick / AUTOTUNE) and ``low``-``high`` its
    ``confidence`` interval (:func:`ingestion.measurement.paired_ratio`). A round where either
    failed is left out (``failed_rounds``); with none left, ``vs_autotune`` is None and
    ``error`` says why."""

    autotune_config: Config
    vs_autotune: float | None
    low: float | None
    high: float | None
    confidence: float
    rounds: int
    pick_rows_per_s: list[float]
    autotune_rows_per_s: list[float]
    order: list[str]
    failed_rounds: int
    protocol: dict[str, float | int]  # MeasureProtocol.as_kwargs()
    error: str | None = None

    def to_json(self) -> JsonObject:
        return asdict(self)


def compare_with_autotune(measure: Callable[[Config, MeasureProtocol], Measurement], pick: Config,
                          spec: PipelineSpec, rounds: int, protocol: MeasureProtocol = COMPARE_PROTOCOL,
                          confidence: float = 0.9) -> AutotuneComparison:
    """Measure ``pick`` and :func:`autotune_config` of ``spec`` in turn with ``measure`` (one worker),
    ``rounds`` rounds, and the :class:`AutotuneComparison` of the two."""
    auto = autotune_config(spec)
    picks, autos, order, failed = [], [], [], 0
    for r in range(rounds):
        first, second = ("pick", "autotune") if r % 2 == 0 else ("autotune", "pick")
        got = {name: measure(dict(pick if name == "pick" else auto), protocol) for name in (first, second)}
        order.append(f"{first},{second}")
        if got["pick"].failed or got["autotune"].failed:
            failed += 1
            continue
        picks.append(got["pick"].rows_per_s)
        autos.append(got["autotune"].rows_per_s)
    if not picks:
        return AutotuneComparison(auto, None, None, None, confidence, rounds, [], [], order, failed,
                                  protocol.as_kwargs(), error=f"no round where both ran ({failed} of {rounds} failed)")
    pr = paired_ratio(picks, [max(x, 1e-9) for x in autos], confidence=confidence)
    return AutotuneComparison(auto, pr.ratio, pr.low, pr.high, confidence, rounds, picks, autos, order, failed,
                              protocol.as_kwargs())
