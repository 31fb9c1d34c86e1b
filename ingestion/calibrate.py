"""Calibrate the simulator from a short profile of the real pipeline.

Steps (about 50 s on the built-in DLRM pipeline on 2 cores; cached afterwards):

1. **Per-stage cost from prefix timings.** With every parallelism knob at its smallest value
   (0 = sequential where allowed, so the whole pipeline runs in one thread) each prefix of the
   pipeline (read, read+shuffle, ...) is timed, the median of two windows each
   (``ingestion.measure.profile_stages`` via the measurement worker). In one thread, a prefix's
   time per row is the sum of its stages' times, so stage ``k`` costs ``1/r_k - 1/r_{k-1}`` seconds per row. If the batch knob has more than
   one value, the prefixes are also timed at the smallest batch to split each batched stage's
   cost into a per-row and a per-call part (``t(B) = a + b / B``).
2. **Element sizes.** One element of each prefix is pulled in this process and its tensors'
   bytes divided by its rows give each stage's output bytes per row (buffer memory).
3. **Knob effects, paired.** One ~1 s measurement of the real pipeline varies by about +-12%
   from one to the next, so no single measurement is trusted as the reference. Each other value
   of each non-thread, non-batch knob (shuffle buffer, files open at once, prefetch depth) is
   measured on the single-thread pipeline, alternating with the base (single-thread, default)
   configuration (base, variant, base, variant, ..., base), so every variant sits between two
   base measurements; its effect is its
   ratio to their mean. The **anchor** is the median of all base measurements (the first one
   included). An effect becomes a per-row cost delta of the knob's stage, relative to the anchor,
   only if it clears the noise threshold: ``NOISE_Z`` (2) relative standard deviations of the base
   measurements, at least ``MIN_EFFECT`` (10%) (:func:`knob_deltas`). All stage costs are scaled
   so the model predicts the anchor exactly.
4. **Thread hand-off.** Each parallel stage is given one thread of its own (the rest stays
   sequential) and measured; the extra CPU per element that explains the measurement is the
   stage's asynchronous overhead (tf.data hands each element through a buffer between threads,
   which is expensive for per-row elements and negligible for batches).
5. **Contention.** The model's best configurations are measured too, and the simulator's
   core contention (busy cores slowing each other) and burstiness are fitted to all points
   (least squares on log throughput; the knob variants enter at the anchor times their paired
   ratio), every candidate re-scaled so it still predicts the anchor exactly. The
   oversubscription overhead is 0 for the real pipeline (see :func:`fit_contention`). Base memory comes from the measured resident memory.

Step 1 also reads the cores each single-thread prefix kept busy (CPU seconds of the measuring
process over wall seconds) and books what a stage spent on other threads as its
**helper CPU** (:func:`helper_costs_from_prefixes`; the simulator's "Helper CPU"): TFRecord's
``parse_example`` shards each batch over the intra-op threads, so its single-thread pipeline
keeps about 1.3 cores busy and its two-thread configurations reach only ~1.5x of it, not 2x.

Every measurement's ``cores_busy`` and ``other_cores_busy`` are kept in the fit points, and the
most cores any other process kept busy in ``other_cores_busy_max``: a calibration taken while
another job held a core says so.

The result is a :class:`Calibration` (the model plus what it was fitted from, and its error on
the fitting points), cached as JSON under ``core.paths.cache_dir("profiles")`` keyed by the
pipeline's data reference, its knob space and the hardware fingerprint (and shared through S3 when
``TRAINWISE_STATE`` says so: :mod:`core.state`).
"""

from __future__ import annotations

import json
import math
import statistics
import time
from dataclasses import dataclass, field, replace
from typing import Any, Callable, Mapping, NotRequired, TypedDict

from ingestion.knobs import Config, Knob, KnobSpace
from ingestion.node import Node
from ingestion.simulator import PipelineModel, model_from_space, simulate
from ingestion.measurement import Measurement
from core.errors import UserError
from core.json_edge import JsonObject

Evaluate = Callable[[Config], Measurement]
MIN_STAGE_S = 2e-8  # a floor for a stage's cost per row (timing noise can make a difference negative)
#: Smallest relative knob effect booked as a cost delta (one ~1 s measurement of the real
#: pipeline on 2 cores varies by about +-12%, so smaller paired effects are indistinguishable).
MIN_EFFECT = 0.10
#: A knob effect is booked only above this many relative standard deviations of the base
#: configuration's repeated measurements (when that is more than ``MIN_EFFECT``).
NOISE_Z = 2.0


class KnobEffectJson(TypedDict):
    """A :class:`KnobEffect` as a calibration file holds it."""

    knob: str
    value: int
    ratio: float | None
    threshold: NotRequired[float]
    booked: NotRequired[bool]  # absent in older files: False


@dataclass(frozen=True)
class KnobEffect:
    """One knob value's paired effect (step 3): its measured rate over the bracketing base
    measurements' mean (None when the variant failed), the noise threshold it was held to,
    and whether it was booked as a cost delta."""

    knob: str
    value: int
    ratio: float | None
    booked: bool
    threshold: float | None = None

    def to_dict(self) -> KnobEffectJson:
        out: KnobEffectJson = {"knob": self.knob, "value": self.value, "ratio": self.ratio}
        if self.threshold is not None:
            out["threshold"] = self.threshold
        out["booked"] = self.booked
        return out

    @classmethod
    def from_dict(cls, data: KnobEffectJson) -> KnobEffect:
        ratio, threshold = data.get("ratio"), data.get("threshold")
        return cls(str(data["knob"]), int(data["value"]), None if ratio is None else float(ratio),
                   bool(data.get("booked", False)), None if threshold is None else float(threshold))


class FitPoint(TypedDict, total=False):
    """One configuration the model was fitted to: measured against simulated rows/s, whether
    it ran out of memory, the cores busy while it ran (``Measurement.cores``), and for an
    anchored variant its raw measurement and a note on how ``measured`` was derived."""

    config: Config
    measured: float
    simulated: float
    oom: bool
    cores_busy: float
    other_cores_busy: float
    measured_raw: float
    note: str


class Reanchor(TypedDict):
    """One re-anchor of a calibration's level (:func:`reanchor`): the samples measured at a
    configuration and the level before and after (``None`` after when nothing was usable)."""

    at: str
    config: Config
    protocol: dict[str, float | int]
    samples: list[float]
    level_before: float
    level_after: float | None
    level_factor: float | None
    spread: float | None
    seconds: float
    note: str
    label: str


class CalibrationJson(TypedDict):
    """A :class:`Calibration` as its cache file holds it (keys an older file may lack: NotRequired)."""

    model: JsonObject  # PipelineModel.to_json()
    profile_config: Config
    prefix_rows_per_s: dict[str, float]
    fit_points: NotRequired[list[FitPoint]]
    calibration_s: NotRequired[float]
    key: NotRequired[str]
    base_samples: NotRequired[list[float]]
    knob_effects: NotRequired[list[KnobEffectJson]]
    reanchors: NotRequired[list[Reanchor]]
    prefix_cores_busy: NotRequired[dict[str, float]]
    other_cores_busy_max: NotRequired[float | None]


@dataclass
class Calibration:
    """A calibrated :class:`PipelineModel` and the evidence it came from."""

    model: PipelineModel
    profile_config: Config
    prefix_rows_per_s: dict[str, float]
    fit_points: list[FitPoint] = field(default_factory=list)
    calibration_s: float = 0.0
    cached: bool = False
    key: str = ""
    base_samples: list[float] = field(default_factory=list)
    knob_effects: list[KnobEffect] = field(default_factory=list)
    #: Re-anchors applied since calibration (:func:`reanchor`), oldest first.
    reanchors: list[Reanchor] = field(default_factory=list)
    #: Cores this pipeline's process kept busy in each single-thread prefix timing (step 1), and
    #: the most cores other processes kept busy during the profile and the fitted points (None
    #: where not measured): a calibration taken while another job held a core says so here.
    prefix_cores_busy: dict[str, float] = field(default_factory=dict)
    other_cores_busy_max: float | None = None

    @property
    def fit_error(self) -> float | None:
        """Mean absolute relative error of the model on the points it was fitted to."""
        errs = [abs(p["simulated"] - p["measured"]) / p["measured"] for p in self.fit_points if p["measured"] > 0]
        return sum(errs) / len(errs) if errs else None

    def to_json(self) -> CalibrationJson:
        return {
            "model": self.model.to_json(),
            "profile_config": self.profile_config,
            "prefix_rows_per_s": self.prefix_rows_per_s,
            "fit_points": self.fit_points,
            "calibration_s": self.calibration_s,
            "key": self.key,
            "base_samples": self.base_samples,
            "knob_effects": [e.to_dict() for e in self.knob_effects],
            "reanchors": self.reanchors,
            "prefix_cores_busy": self.prefix_cores_busy,
            "other_cores_busy_max": self.other_cores_busy_max,
        }

    @classmethod
    def from_json(cls, data: CalibrationJson) -> "Calibration":
        return cls(
            model=PipelineModel.from_json(data["model"]),
            profile_config={k: int(v) for k, v in data["profile_config"].items()},
            prefix_rows_per_s={k: float(v) for k, v in data["prefix_rows_per_s"].items()},
            fit_points=list(data.get("fit_points", [])),
            calibration_s=float(data.get("calibration_s", 0.0)),
            cached=True,
            key=str(data.get("key", "")),
            base_samples=[float(x) for x in data.get("base_samples", [])],
            knob_effects=[KnobEffect.from_dict(e) for e in data.get("knob_effects", [])],
            reanchors=list(data.get("reanchors", [])),
            prefix_cores_busy={k: float(v) for k, v in data.get("prefix_cores_busy", {}).items()},
            other_cores_busy_max=(None if data.get("other_cores_busy_max") is None
                                  else float(data["other_cores_busy_max"])),
        )


def sequential_config(space: KnobSpace) -> Config:
    """Every CPU knob at its smallest value (0 = inline if allowed), other knobs at their default."""
    config = space.initial()
    for k in space.cpu_knobs:
        config[k.name] = k.values[0]
    return config


def _prefix_times(stages: list[str], prefix_rows_per_s: Mapping[str, float]) -> list[float]:
    """Seconds per row of each prefix, over the monotone envelope (see below)."""
    totals = [1.0 / prefix_rows_per_s[s] if prefix_rows_per_s[s] > 0 else math.inf for s in stages]
    return [min(totals[i:]) for i in range(len(totals))]


def stage_costs_from_prefixes(stages: list[str], prefix_rows_per_s: Mapping[str, float]) -> dict[str, float]:
    """Seconds per row of each stage from single-thread prefix rates.

    A longer prefix cannot take less time per row than a shorter one, but timing noise and the
    measuring harness (short prefixes are re-batched for timing) can make it look so. So the
    time of prefix ``k`` is taken as the least time of any prefix at least as long (a monotone
    envelope), and stage ``k`` costs the difference to the previous prefix.
    """
    envelope = _prefix_times(stages, prefix_rows_per_s)
    costs: dict[str, float] = {}
    previous = 0.0
    for stage, total in zip(stages, envelope):
        costs[stage] = max(MIN_STAGE_S, total - previous)
        previous = total
    return costs


#: A single-thread prefix that keeps fewer cores busy than this counts as one core (the clock's
#: granularity and the consuming loop's own CPU; 1.00-1.02 measured for read, shuffle and batch).
HELPER_MIN_CORES = 1.05


def helper_costs_from_prefixes(
    stages: list[str], prefix_rows_per_s: Mapping[str, float], prefix_cores: Mapping[str, float]
) -> dict[str, float]:
    """CPU seconds per row each stage spends on other threads (intra-op helpers), from the cores
    the single-thread prefixes kept busy (``ingestion.measure``: CPU s / wall s of the process).

    A prefix that runs in one thread but keeps ``k`` cores busy spends ``(k - 1) * t`` CPU
    seconds per row off that thread (``t`` its time per row, the envelope of
    :func:`stage_costs_from_prefixes`); stage ``i``'s helper CPU is the increase of that over the
    previous prefix, with a running maximum so noise cannot make it negative. Prefixes under
    ``HELPER_MIN_CORES`` count as one core; without cores measured every stage gets 0 (the model
    of version 4 and before). On this machine TFRecord's ``parse`` (``parse_example``, which
    shards a batch over the intra-op threads) kept 1.41 cores busy; TSV's ``decode_csv`` about
    1.0 (measured; docs/experiments/2026-12-01-intra-op-helper-cpu.md).
    """
    if not prefix_cores:
        return {}
    times = _prefix_times(stages, prefix_rows_per_s)
    out: dict[str, float] = {}
    previous = 0.0
    for stage, t in zip(stages, times):
        cores = float(prefix_cores.get(stage, 1.0))
        off_thread = (cores - 1.0) * t if cores >= HELPER_MIN_CORES and math.isfinite(t) else 0.0
        off_thread = max(off_thread, previous)
        out[stage] = off_thread - previous
        previous = off_thread
    return out


def split_per_call(
    cost_big: Mapping[str, float], cost_small: Mapping[str, float], big: int, small: int
) -> dict[str, tuple[float, float]]:
    """Per stage (per-row, per-call) seconds from costs per row at two batch sizes."""
    out = {}
    for stage, t_big in cost_big.items():
        t_small = cost_small.get(stage, t_big)
        per_call = max(0.0, (t_small - t_big) / (1.0 / small - 1.0 / big))
        per_row = max(MIN_STAGE_S, t_big - per_call / big)
        out[stage] = (per_row, per_call)
    return out


def element_bytes_per_row(spec: Any, config: Config) -> dict[str, float]:
    """Bytes per row of each prefix's output (one element pulled in this process)."""
    import tensorflow as tf

    out: dict[str, float] = {}
    for stage in spec.stages:
        element = next(iter(spec.build_upto(config, stage)))
        tensors = tf.nest.flatten(element)
        rows = int(tensors[0].shape[0]) if tensors[0].shape.rank else 1
        nbytes = 0
        for t in tensors:
            if t.dtype == tf.string:
                nbytes += int(tf.reduce_sum(tf.strings.length(t)).numpy()) + 8 * int(tf.size(t))
            else:
                nbytes += int(tf.size(t)) * t.dtype.size
        out[stage] = nbytes / max(1, rows)
    return out


def scale_cpu(model: PipelineModel, factor: float) -> PipelineModel:
    """A copy of ``model`` with every stage's CPU cost (per row, per call, helper, deltas) times ``factor``."""
    return replace(model, stages=tuple(replace(
        s, cpu_s_per_row=s.cpu_s_per_row * factor, cpu_s_per_call=s.cpu_s_per_call * factor,
        helper_cpu_s_per_row=s.helper_cpu_s_per_row * factor,
        cost_deltas={k: {v: d * factor for v, d in t.items()} for k, t in s.cost_deltas.items()})
        for s in model.stages))


def scale_level(model: PipelineModel, factor: float) -> PipelineModel:
    """A copy of ``model`` on a machine ``factor`` times slower: every time cost (CPU per row,
    per call, per hand-off, knob deltas, and wait) times ``factor``. The model's throughput of
    *every* configuration is then exactly ``1 / factor`` of before (processor sharing, busy-core
    contention and buffer smoothing depend only on ratios of costs), so knob effects and the
    ranking of configurations are kept; only the level moves."""
    return replace(model, stages=tuple(replace(
        s, cpu_s_per_row=s.cpu_s_per_row * factor, cpu_s_per_call=s.cpu_s_per_call * factor,
        wait_s_per_row=s.wait_s_per_row * factor, async_cpu_s_per_call=s.async_cpu_s_per_call * factor,
        helper_cpu_s_per_row=s.helper_cpu_s_per_row * factor,
        cost_deltas={k: {v: d * factor for v, d in t.items()} for k, t in s.cost_deltas.items()})
        for s in model.stages))


def anchored(model: PipelineModel, node: Node, anchor: tuple[Config, Measurement] | None) -> PipelineModel:
    """``model`` with its CPU costs scaled so that it predicts the ``anchor`` measurement exactly
    (the single-thread pipeline: a change of buffer smoothing must not move it)."""
    if anchor is None or anchor[1].rows_per_s <= 0:
        return model
    predicted = simulate(model, anchor[0], node).rows_per_s
    return scale_cpu(model, predicted / anchor[1].rows_per_s) if predicted > 0 else model


def fit_contention(
    model: PipelineModel, node: Node, points: list[tuple[Config, Measurement]],
    anchor: tuple[Config, Measurement] | None = None,
) -> PipelineModel:
    """Fit burstiness and core contention to measured points (grid least squares on log
    throughput), each candidate re-anchored to the single-thread measurement ``anchor``.

    The oversubscription overhead (a cost per thread beyond the cores, which the synthetic
    pipelines of the simulated nodes have) is set to 0 here: on the real pipeline a thread that
    waits on its buffer costs nothing measurable, and fitted to a handful of calibration points it
    took the slowdown that comes from busy cores (measured: 8.8 CPU-us per row on one core,
    10.8-11.4 with both cores working) and charged it to idle threads instead.
    """
    usable = [(c, m) for c, m in points if not m.failed and m.rows_per_s > 0]
    if not usable:
        return model
    # A grid, not scipy.optimize.least_squares: the log error is not smooth or convex in these
    # two (the simulator's bottleneck switches stage), and a least-squares fit from one start
    # stopped in a local minimum on the helper-CPU pipeline of tests/ingestion/test_calibrate.py
    # (measured: fit error 0.0134 against the grid's 0.0001, every configuration's mean error
    # 3.2% against 0.45%; it did better on the plain pipeline at 2, 4 and 8 vCPUs, 0.7-3.2%
    # against 1.7-6.4%, but a fit that can land there is not a safe default).
    best, best_err = model, math.inf
    for contention in (0.0, 0.1, 0.2, 0.35, 0.5, 0.75, 1.0):
        for burst in (0.0, 0.05, 0.1, 0.2, 0.3):
            candidate = anchored(replace(model, oversub_overhead=0.0, burstiness=burst, core_contention=contention),
                                 node, anchor)
            err = sum(math.log(simulate(candidate, c, node).rows_per_s / m.rows_per_s) ** 2 for c, m in usable)
            if err < best_err - 1e-12:
                best, best_err = candidate, err
    return best


def contention_configs(model: PipelineModel, space: KnobSpace, node: Node, count: int = 3) -> list[Config]:
    """Whole-pipeline configurations to fit contention on: the model's best, then varied ones."""
    base = sequential_config(space)
    ranked = sorted(space.grid(), key=lambda c: -simulate(model, c, node).score) if space.grid_size() <= 5000 else []
    chosen: list[Config] = []
    # The model's best, then the best ones that differ from those chosen in their CPU split.
    for c in ranked:
        split = tuple(c[k.name] for k in space.cpu_knobs)
        if all(split != tuple(o[k.name] for k in space.cpu_knobs) for o in chosen):
            chosen.append(c)
        if len(chosen) >= count:
            break
    if not chosen:
        for k in space.cpu_knobs:
            c = dict(base)
            c[k.name] = max(v for v in k.values if v <= space.cpu_budget)
            if space.is_valid(c):
                chosen.append(c)
    return chosen[:count]


def noise_threshold(samples: list[float], floor: float = MIN_EFFECT, z: float = NOISE_Z) -> float:
    """The smallest relative effect that is not measurement noise: ``z`` times the relative
    standard deviation of repeated measurements of one configuration, at least ``floor``."""
    usable = [x for x in samples if x > 0]
    if len(usable) < 2:
        return floor
    return max(floor, z * statistics.stdev(usable) / statistics.mean(usable))


def knob_deltas(
    space: KnobSpace, base_config: Config, first_base: Measurement, measure: Callable[[Config], Measurement],
    *, floor: float = MIN_EFFECT, z: float = NOISE_Z,
) -> tuple[dict[str, dict[str, dict[int, float]]], list[tuple[Config, Measurement]], list[float], list[KnobEffect]]:
    """Per non-CPU, non-batch knob value: extra seconds per row against the default on the
    single-thread pipeline, from **paired** measurements.

    The base configuration is measured again before the first variant and after each one
    (base, variant, base, variant, base, ...), so each variant sits between two base measurements and its effect is the ratio
    ``r`` of the variant to the mean of those two: a drift of the machine or one lucky base
    measurement moves both sides. The anchor is the median of all base measurements
    (``first_base`` included). An effect is booked only if ``|1 - r|`` clears
    :func:`noise_threshold` of the base measurements (their own spread, at least ``floor``), as
    ``(1/r - 1) / anchor`` seconds per row.

    Returns ``{stage: {knob: {value: delta}}}``, the variants' points, every base measurement
    (rows/s, in order) and one record per variant (its ratio and whether it was booked)."""
    deltas: dict[str, dict[str, dict[int, float]]] = {}
    points: list[tuple[Config, Measurement]] = []
    if first_base.rows_per_s <= 0:
        return deltas, points, [], []
    base_samples = [first_base.rows_per_s]
    variants: list[tuple[Knob, int, Measurement, float]] = []  # knob, value, measurement, bracket mean
    previous = 0.0
    for k in space.knobs:
        if k.kind in ("cpu", "batch") or len(k.values) < 2:
            continue
        for v in k.values:
            if v == base_config[k.name]:
                continue
            if not previous:  # the first variant is bracketed too (the first base was measured apart)
                previous = measure(base_config).rows_per_s
                if previous > 0:
                    base_samples.append(previous)
            config = {**base_config, k.name: v}
            m = measure(config)
            points.append((config, m))
            after = measure(base_config).rows_per_s
            if after > 0:
                base_samples.append(after)
            bracket = [x for x in (previous, after) if x > 0]
            previous = after if after > 0 else previous
            # both neighbouring base measurements failed: compare with the anchor instead (below)
            variants.append((k, int(v), m, sum(bracket) / len(bracket) if bracket else 0.0))
    anchor = statistics.median(base_samples)
    threshold = noise_threshold(base_samples, floor, z)
    effects: list[KnobEffect] = []
    for k, v, m, bracket in variants:
        if m.failed or m.rows_per_s <= 0:
            effects.append(KnobEffect(k.name, v, None, False))
            continue
        ratio = m.rows_per_s / (bracket or anchor)
        booked = abs(1.0 - ratio) >= threshold
        effects.append(KnobEffect(k.name, v, ratio, booked, threshold))
        if booked:
            deltas.setdefault(k.stage or k.name, {}).setdefault(k.name, {})[v] = (1.0 / ratio - 1.0) / anchor
    return deltas, points, base_samples, effects


def fit_async_overhead(
    model: PipelineModel, node: Node, stage: str, config: Config, measured: float, tolerance: float = 0.05
) -> float:
    """CPU seconds per element that make ``stage``'s own threads cost what was measured (the root
    of the simulated rate less the measured one, ``scipy.optimize.brentq``, once an upper end is
    found by doubling; 0 if the model without overhead is within ``tolerance`` of the
    measurement or under it; 10 s at most)."""
    from scipy.optimize import brentq

    def excess(overhead: float) -> float:
        m = replace(model, stages=tuple(replace(s, async_cpu_s_per_call=overhead) if s.name == stage else s
                                        for s in model.stages))
        return simulate(m, config, node).rows_per_s - measured

    if measured <= 0 or excess(0.0) <= measured * tolerance:
        return 0.0  # nothing to explain (within measurement noise)
    hi = 1e-6
    while excess(hi) > 0 and hi < 10.0:
        hi *= 2
    if excess(hi) > 0:
        return hi  # slower than any overhead up to the cap explains
    return float(brentq(excess, 0.0, hi, xtol=hi * 2**-40))


#: Bump when the calibration method changes, so cached profiles of an older method are not reused.
#: 5: the prefixes' cores give each stage's helper CPU (``helper_costs_from_prefixes``).
CALIBRATION_VERSION = 5


def cache_key(spec: Any, node: Node) -> str:
    from core.paths import fingerprint, hardware_fingerprint

    ref = spec.reference() if getattr(spec, "portable", False) else {"name": spec.name}
    knobs = [(k.name, k.kind, k.stage, list(k.values)) for k in spec.space.knobs]
    facts = {'ref': ref, 'knobs': knobs, 'node': node.__dict__, 'hw': hardware_fingerprint(), 'method': CALIBRATION_VERSION}
    return f"{spec.name}-{fingerprint(facts)}"


def _default_evaluator(spec: Any, node: Node) -> tuple[Callable[..., Measurement], Any]:
    """How calibration measures when no ``evaluate`` is given: in a measurement worker (returned
    too, for the caller to close) when the pipeline is portable, else in this process."""
    from ingestion.measure import MeasureWorker, measure_in_process

    if spec.portable:
        worker = MeasureWorker(spec, memory_limit_mb=node.ram_budget_mb)
        return (lambda c, **kw: worker.measure(c, **kw)), worker
    return (lambda c, **kw: measure_in_process(spec, c, **kw)), None


@dataclass(frozen=True)
class _Profiling:
    """One calibration's fixed inputs: the pipeline, the node, the single-thread base
    configuration, how to measure, the window, and the time budget from ``started`` (None: none)."""

    spec: Any
    node: Node
    config: Config
    evaluate: Callable[..., Measurement]
    window_s: float
    started: float
    time_budget_s: float | None

    def measure_whole(self, c: Config) -> Measurement:
        """One window of the whole pipeline at ``c`` (the base protocol)."""
        return self.evaluate(c, warmup_s=0.5, window_s=self.window_s, repeats=1)

    def in_time(self) -> bool:
        """Whether an optional step still fits: before 80% of the time budget."""
        return self.time_budget_s is None or time.monotonic() - self.started < 0.8 * self.time_budget_s


def _cached(path: Any) -> Calibration | None:
    """The calibration cached at ``path``, or None (absent, stale or damaged: recalibrate)."""
    if not path.exists():
        return None
    try:
        return Calibration.from_json(json.loads(path.read_text()))
    except (ValueError, KeyError, TypeError):
        return None


def _stage_costs(p: _Profiling, base: Measurement) -> tuple[dict[str, dict[str, float]], dict[str, float]]:
    """Steps 1 and 2: each stage's costs from the base's prefix timings (split into per-row and
    per-call parts when a smaller batch can be timed too), its helper CPU and its output bytes per
    row; and the prefix rates they came from."""
    prefix = dict(base.extra.get("stage_rows_per_s", {}))
    stages = [s for s in p.spec.stages if s in prefix]
    per_row = stage_costs_from_prefixes(stages, prefix)
    batch = next((k for k in p.spec.space.knobs if k.kind == "batch"), None)
    costs: dict[str, dict[str, float]]
    if batch is not None and len(batch.values) > 1 and p.config[batch.name] != batch.values[0]:
        small_cfg = {**p.config, batch.name: batch.values[0]}
        small = p.evaluate(small_cfg, warmup_s=0.5, window_s=p.window_s, repeats=1, stage_profile=True)
        split = split_per_call(per_row, stage_costs_from_prefixes(stages, small.extra["stage_rows_per_s"]),
                               p.config[batch.name], batch.values[0])
        costs = {s: {"cpu_s_per_row": a, "cpu_s_per_call": b * 1.0} for s, (a, b) in split.items()}
    else:
        costs = {s: {"cpu_s_per_row": t} for s, t in per_row.items()}
    # the CPU the single-thread prefixes spent on other threads (helper CPU)
    for s, h in helper_costs_from_prefixes(stages, prefix, base.extra.get("stage_cores_busy", {})).items():
        costs.setdefault(s, {})["helper_cpu_s_per_row"] = h
    try:
        sizes = element_bytes_per_row(p.spec, p.config)
    except Exception:  # noqa: BLE001  sizes are a refinement; the profile stands without them
        sizes = {}
    for s, b in sizes.items():
        costs.setdefault(s, {})["bytes_per_row"] = b
    return costs, prefix


@dataclass(frozen=True)
class _Anchored:
    """Step 3's result: the model scaled to the anchor with the knob effects booked, the fit
    points so far (the anchor first), the raw measurements of the paired variants (by point
    index), the base measurements and the knob effects."""

    model: PipelineModel
    anchor: tuple[Config, Measurement]
    points: tuple[tuple[Config, Measurement], ...]
    raw: dict[int, Measurement]
    base_samples: list[float]
    effects: list[KnobEffect]


def _anchor_with_knob_effects(p: _Profiling, model: PipelineModel, base: Measurement) -> _Anchored:
    """Step 3: knob effects the structure does not explain (shuffle buffer size, files open at
    once...), each paired with base measurements; the anchor is the median of all base
    measurements. All costs are scaled so the single-thread point matches the anchor; the deltas
    are already relative to it, so they join after the scaling. The variants enter the fits at
    the anchor's level times their paired ratio (the ratio is what the pairing measured well; the
    level of one measurement is as noisy as any)."""
    base_samples, effects = [base.rows_per_s], []
    more: list[tuple[Config, Measurement]] = []
    deltas: dict[str, dict[str, dict[int, float]]] = {}
    if p.in_time():
        deltas, more, base_samples, effects = knob_deltas(p.spec.space, p.config, base, p.measure_whole)
    anchor = (p.config, replace(base, rows_per_s=statistics.median(base_samples) if base_samples else base.rows_per_s))
    model = anchored(model, p.node, anchor)
    model = replace(model, stages=tuple(replace(s, cost_deltas=deltas.get(s.name, {})) for s in model.stages))
    points: list[tuple[Config, Measurement]] = [anchor]
    raw: dict[int, Measurement] = {}
    for (c, m), e in zip(more, effects):
        if e.ratio:
            raw[len(points)] = m
            m = replace(m, rows_per_s=anchor[1].rows_per_s * e.ratio)
        points.append((c, m))
    return _Anchored(model, anchor, tuple(points), raw, base_samples, effects)


Points = list[tuple[Config, Measurement]]


def _with_handoff_costs(p: _Profiling, model: PipelineModel, points: Points) -> tuple[PipelineModel, Points]:
    """Step 4: the price of running a stage on threads of its own, from one thread at each
    stage in turn; the model with it, and ``points`` with those measurements."""
    points = list(points)
    overheads: dict[str, float] = {}
    for k in p.spec.space.cpu_knobs:
        positive = [v for v in k.values if v > 0]
        stage = k.stage or k.name
        if not positive or positive[0] == p.config[k.name] or not p.in_time():
            continue
        c = {**p.config, k.name: positive[0]}
        m = p.measure_whole(c)
        points.append((c, m))
        overheads[stage] = fit_async_overhead(model, p.node, stage, c, m.rows_per_s)
    return replace(model, stages=tuple(replace(s, async_cpu_s_per_call=overheads.get(s.name, 0.0))
                                       for s in model.stages)), points


def _with_contention(p: _Profiling, model: PipelineModel, points: Points, anchor: tuple[Config, Measurement],
                     contention_points: int) -> tuple[PipelineModel, Points]:
    """Step 5: contention fitted on everything so far, then on the model's best configurations
    measured too; the model, and ``points`` with those measurements."""
    points = list(points)
    model = fit_contention(model, p.node, points, anchor)
    for c in contention_configs(model, p.spec.space, p.node, contention_points):
        if not p.in_time():
            break
        if any(c == q[0] for q in points):
            continue
        points.append((c, p.measure_whole(c)))
    return fit_contention(model, p.node, points, anchor), points


@dataclass(frozen=True)
class _Fitted:
    """Steps 1-5's result: the fitted model, the base measurement, the prefix rates it gave
    (empty without per-stage timing), step 3's result and every fit point (step 3's, then
    those steps 4 and 5 measured)."""

    model: PipelineModel
    base: Measurement
    prefix: dict[str, float]
    step3: _Anchored
    points: tuple[tuple[Config, Measurement], ...]


def _profile_and_fit(p: _Profiling, contention_points: int) -> _Fitted:
    """Measure the base configuration (with per-stage timing when the pipeline allows it) and
    run steps 1-5 on it."""
    space: KnobSpace = p.spec.space
    has_prefixes = bool(getattr(p.spec, "stages", ())) and getattr(p.spec, "build_upto", None) is not None
    base = p.evaluate(p.config, warmup_s=0.5, window_s=p.window_s, repeats=2, stage_profile=has_prefixes)
    costs, prefix = _stage_costs(p, base) if has_prefixes else ({}, {})
    model = model_from_space(space, costs=costs, name=p.spec.name, source="calibrated")
    model = replace(model, base_mb=max(50.0, base.peak_rss_mb - (memory_mb_of(model, p.config) - model.base_mb)))
    step3 = _anchor_with_knob_effects(p, model, base)
    model = fit_contention(step3.model, p.node, list(step3.points), step3.anchor)  # burstiness from the buffer variations
    model, points = _with_handoff_costs(p, model, list(step3.points))
    model, points = _with_contention(p, model, points, step3.anchor, contention_points)
    return _Fitted(model, base, prefix, step3, tuple(points))


def _calibration_of(p: _Profiling, fitted: _Fitted, key: str) -> Calibration:
    """The calibration: the model, its fit points (measured against simulated, the variants
    with their raw measurement), and the cores other processes kept busy meanwhile."""
    model, base, step3 = fitted.model, fitted.base, fitted.step3
    points, raw = fitted.points, step3.raw
    fit_points: list[FitPoint] = [
        {"config": c, "measured": m.rows_per_s, "simulated": simulate(model, c, p.node).rows_per_s, "oom": m.failed,
         **m.cores}
        for c, m in points
    ]
    fit_points[0]["note"] = f"median of {len(step3.base_samples)} base measurements"
    for i, m in raw.items():
        fit_points[i].update(measured_raw=m.rows_per_s, note="anchor x paired ratio to the adjacent base measurements",
                             **m.cores)
    others = [float(m.extra["other_cores_busy"]) for m in [base, *raw.values(), *(m for _, m in points)]
              if m.extra.get("other_cores_busy") is not None]
    return Calibration(model, p.config, fitted.prefix, fit_points, round(time.monotonic() - p.started, 2), False, key,
                       base_samples=step3.base_samples, knob_effects=step3.effects,
                       prefix_cores_busy=dict(base.extra.get("stage_cores_busy", {})),
                       other_cores_busy_max=max(others) if others else None)


def calibrate(
    spec: Any,
    node: Node,
    *,
    time_budget_s: float | None = None,
    use_cache: bool = True,
    evaluate: Evaluate | None = None,
    window_s: float = 1.0,
    contention_points: int = 2,
) -> Calibration:
    """Profile ``spec`` briefly and return the calibrated simulator model (cached).

    ``evaluate`` measures a whole configuration (default: a measurement worker). The profile
    needs ``spec.stages`` and ``spec.build_upto``; without them the model keeps the uninformed
    per-stage costs and only the contention fit uses the pipeline. The optional steps (knob
    effects, hand-off costs, contention points) start only before 80% of ``time_budget_s``.
    """
    from core import state
    from core.paths import cache_dir
    from core.results import write_json

    key = cache_key(spec, node)
    path = cache_dir("profiles") / f"{key}.json"
    cached = _cached(path) if use_cache and state.pull(path) else None
    if cached is not None:
        return cached
    started = time.monotonic()
    worker = None
    if evaluate is None:
        evaluate, worker = _default_evaluator(spec, node)
    p = _Profiling(spec, node, sequential_config(spec.space), evaluate, window_s, started, time_budget_s)
    try:
        fitted = _profile_and_fit(p, contention_points)
    finally:
        if worker is not None:
            worker.close()
    result = _calibration_of(p, fitted, key)
    state.push(write_json(path, result.to_json(), with_environment=False))
    return result


#: How calibration measures its base configuration in step 3 (``measure_whole``); a re-anchor
#: measures it the same way, so the two levels differ only by the machine, not by the protocol.
BASE_PROTOCOL: dict[str, float | int] = {"warmup_s": 0.5, "window_s": 1.0, "repeats": 1}
#: Base measurements one re-anchor takes; their median is the new level (as step 3's anchor).
REANCHOR_SAMPLES = 5


def reanchor(
    calibration: Calibration,
    node: Node,
    *,
    spec: Any = None,
    evaluate: Callable[..., Measurement] | None = None,
    samples: int = REANCHOR_SAMPLES,
    protocol: Mapping[str, float | int] | None = None,
    note: str = "",
) -> Calibration:
    """``calibration`` with its level moved to the machine's speed *now*: the calibration's base
    configuration (``profile_config``, the single-thread pipeline its anchor was measured on) is
    measured ``samples`` times with the calibration's own protocol (``BASE_PROTOCOL``), and every
    time cost of the model is scaled (:func:`scale_level`) so the model predicts their median.
    Knob effects, hand-off costs, contention and memory are kept: a re-anchor tracks a drift of
    the machine's speed (measured here at up to 1.7x within minutes), not a change of the pipeline.
    Costs ``samples`` short measurements (about 1.5 s each), not a recalibration (about 50 s).

    ``evaluate(config, **protocol)`` measures (default: a measurement worker on ``spec``). The
    returned calibration's ``reanchors`` gets one record: the samples, the levels before and
    after and their ratio (``level_factor`` > 1: the machine is faster now than the model said).
    """
    protocol = dict(BASE_PROTOCOL if protocol is None else protocol)
    config = dict(calibration.profile_config)
    worker = None
    if evaluate is None:
        if spec is None:
            raise ValueError("reanchor needs a spec or an evaluate function")
        evaluate, worker = _default_evaluator(spec, node)
    started = time.monotonic()
    try:
        rates = [evaluate(config, **protocol).rows_per_s for _ in range(max(1, samples))]
    finally:
        if worker is not None:
            worker.close()
    usable = [x for x in rates if x > 0]
    before = simulate(calibration.model, config, node).rows_per_s
    record: Reanchor = {
        "at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()), "config": config, "protocol": protocol,
        "samples": rates, "level_before": before, "level_after": None, "level_factor": None,
        "spread": None, "seconds": round(time.monotonic() - started, 2), "note": note, "label": "measured",
    }
    if not usable or before <= 0:  # nothing measured: keep the level, say so
        record["note"] = (note + "; " if note else "") + "no usable measurement: level kept"
        return replace(calibration, reanchors=[*calibration.reanchors, record])
    level = statistics.median(usable)
    record.update(level_after=level, level_factor=level / before,
                  spread=(max(usable) - min(usable)) / level)
    return replace(calibration, model=scale_level(calibration.model, before / level),
                   reanchors=[*calibration.reanchors, record])


def memory_mb_of(model: PipelineModel, config: Mapping[str, int]) -> float:
    from ingestion.simulator import memory_mb

    return memory_mb(model, config)[0]
