"""Tuning a pipeline on the live machine: the loop behind ``trainwise ingest tune``.

1. build the optimizer (its construction time counts as tuning time: a model-based
   optimizer may profile the pipeline first);
2. ask/tell under the time budget, every trial measured in one persistent worker
   subprocess (:class:`~ingestion.measure.MeasureWorker`) with a short window;
3. take the optimizer's recommendation (``recommendation``: the best search trial unless the
   optimizer keeps its own estimate) and re-measure it with a longer, repeated window (the *final*
   measurement). The reported ``rows_per_s`` and ``peak_rss_mb`` come from this final
   measurement, never from the search's best trial: the best of many noisy short
   trials is biased upwards, and every optimizer gets the same final protocol, so the
   figures compare fairly.

``tuning_s`` is wall time from step 1 to the end of step 2 (the final measurement is
verification, not tuning).

**Control measurements** (``control``, used by the benchmark's grid): a fixed configuration
measured in the same worker with the same protocol before every ``control_every``-th trial and
once after the last, so a drift of the machine's speed during a long search is measured. They
are not trials: the optimizer never sees them, they are not in ``history``, and no trial's
rows/s is rescaled by them; they are listed in ``search["controls"]`` (their time is in
``tuning_s``, and separately in ``search["controls_s"]``).
"""

from __future__ import annotations

import sys
import time
from dataclasses import asdict, dataclass
from typing import Any, Callable

from ingestion.measure import MeasureWorker, measure_in_process
from ingestion.node import Node
from ingestion.pipeline import PipelineSpec
from ingestion.measurement import Config, Measurement
from optimizers.asktell import Optimizer, SearchResult, Trial, run
from optimizers.ingestion_optimizers import INGESTION_OPTIMIZERS, OptimizerRequest
from core.errors import UserError


@dataclass(frozen=True)
class MeasureProtocol:
    """Warm-up, window and repeats of one measurement (seconds)."""

    warmup_s: float
    window_s: float
    repeats: int

    def as_kwargs(self) -> dict[str, Any]:
        return {"warmup_s": self.warmup_s, "window_s": self.window_s, "repeats": self.repeats}


SEARCH_PROTOCOL = MeasureProtocol(warmup_s=1.0, window_s=1.5, repeats=2)
FINAL_PROTOCOL = MeasureProtocol(warmup_s=4.0, window_s=3.0, repeats=3)


def recommendation(opt: Any, result: Any) -> tuple[Config, Measurement]:
    """The configuration an optimizer recommends and its search measurement: its own ``best``
    (configuration, measurement) if it keeps one (InTune measures its closest candidates again
    and recommends by the mean), else the best single trial of the search."""
    own = getattr(opt, "best", None)
    if isinstance(own, tuple) and len(own) == 2 and own[0] is not None and not own[1].oom:
        return dict(own[0]), own[1]
    return dict(result.best_config), result.best


@dataclass(frozen=True)
class IngestTuningResult:
    """What tuning a pipeline found: the chosen configuration and its final measurement.

    ``rows_per_s`` and ``peak_rss_mb`` come from the final measurement (or the search's own
    measurement of the chosen configuration when ``final`` is None); ``search`` holds the
    trials, their history and the protocol; :meth:`to_json` is the JSON ``ingest tune`` writes.
    """

    optimizer: str
    pipeline: str
    config: Config
    rows_per_s: float
    peak_rss_mb: float
    tuning_s: float
    label: str
    oom: bool
    final_measurement: dict[str, Any]
    search: dict[str, Any]
    node: dict[str, Any]

    def to_json(self) -> dict[str, Any]:
        return asdict(self)


def calibration_for(spec: PipelineSpec, node: Node) -> Callable[[], Any]:
    """The pipeline's calibration, made when first asked for (cached per data and hardware):
    what ``tune_pipeline`` gives an optimizer that requires one when the caller gave none."""

    def load() -> Any:
        from ingestion.calibrate import calibrate

        return calibrate(spec, node)

    return load


def build_optimizer(
    spec: PipelineSpec, node: Node, optimizer: str | Optimizer, *, time_budget_s: float, seed: int,
    calibration: Callable[[], Any] | None,
) -> Optimizer:
    """``optimizer`` itself if already built, else the registry's, calibrated if it requires it."""
    if not isinstance(optimizer, str):
        return optimizer
    entry = INGESTION_OPTIMIZERS.get(optimizer)
    if calibration is None and entry.needs_calibration:
        calibration = calibration_for(spec, node)
    return entry.factory(OptimizerRequest(spec, node, time_budget_s, seed, calibration))


def _progress(trial: Trial) -> None:
    m = trial.measurement
    figure = "OOM/failed" if m.oom else f"{m.rows_per_s:,.0f} rows/s, {m.peak_rss_mb:,.0f} MB"
    print(f"  [{trial.elapsed_s:6.1f}s] {figure}  {trial.config}", file=sys.stderr, flush=True)


def _failures(trials: list[Trial]) -> dict[str, int]:
    """How many trials failed, by reason (out of memory, a hung or dead worker, a pipeline error)."""
    counts: dict[str, int] = {}
    for t in trials:
        if t.measurement.oom:
            reason = str(t.measurement.extra.get("failure", "out of memory")).split(":")[0]
            counts[reason] = counts.get(reason, 0) + 1
    return counts


def tune_pipeline(
    spec: PipelineSpec,
    node: Node,
    optimizer: str | Optimizer,
    *,
    time_budget_s: float,
    seed: int = 0,
    max_trials: int | None = None,
    search: MeasureProtocol = SEARCH_PROTOCOL,
    final: MeasureProtocol | None = FINAL_PROTOCOL,
    calibration: Callable[[], Any] | None = None,
    progress: bool = True,
    worker: MeasureWorker | None = None,
    control: Config | None = None,
    control_every: int = 10,
) -> IngestTuningResult:
    """Tune ``spec`` on ``node`` with ``optimizer`` (see the module doc).

    ``optimizer`` is a registry name (``optimizers.ingestion_optimizers.INGESTION_OPTIMIZERS``),
    or an ask/tell optimizer already built (e.g. a grid in another order), named by its ``name``.
    ``calibration`` (called only by optimizers that use one) defaults, for an optimizer that
    requires one, to calibrating the pipeline here (:func:`calibration_for`)."""
    name = optimizer if isinstance(optimizer, str) else optimizer.name
    if time_budget_s <= 0:
        raise UserError(f"the tuning time budget must be positive, got {time_budget_s} s")
    own_worker = worker is None and spec.portable
    w = MeasureWorker(spec, memory_limit_mb=node.ram_budget_mb) if own_worker else worker
    controls: list[dict[str, Any]] = []
    trials_done = 0
    controls_s = 0.0
    try:

        def measure(config: Config) -> Measurement:
            if w is not None:
                return w.measure(config, **search.as_kwargs())
            return measure_in_process(spec, config, **search.as_kwargs())

        def measure_control() -> None:
            nonlocal controls_s
            t = time.monotonic()
            m = measure(dict(control))  # type: ignore[arg-type]
            controls_s += time.monotonic() - t
            controls.append({"before_trial": trials_done, "elapsed_s": round(t - start, 2),
                             "rows_per_s": m.rows_per_s, "oom": m.oom, "label": m.label, **m.cores})

        def evaluate(config: Config) -> Measurement:
            nonlocal trials_done
            if control is not None and control_every > 0 and trials_done % control_every == 0:
                measure_control()
            trials_done += 1
            return measure(config)

        start = time.monotonic()
        opt = build_optimizer(spec, node, optimizer, time_budget_s=time_budget_s, seed=seed, calibration=calibration)
        remaining = max(0.0, time_budget_s - (time.monotonic() - start))
        result = run(opt, evaluate, time_budget_s=remaining, max_trials=max_trials,
                     on_trial=_progress if progress else None)
        if not result.trials:
            # The optimizer's set-up (calibration, agent loading) used the whole budget: measure
            # its first proposal anyway rather than return nothing; tuning_s shows the overrun.
            setup_s = time.monotonic() - start
            result = run(opt, evaluate, max_trials=1, on_trial=_progress if progress else None)
            result.stopped_by = f"time budget (optimizer set-up took {setup_s:.0f} s; one trial measured past it)"
        if control is not None and control_every > 0 and trials_done:
            measure_control()  # closing control, after the last trial
        tuning_s = time.monotonic() - start
        if result.best_config is None or result.best is None or result.best.oom:
            reasons = sorted({str(t.measurement.extra.get("failure")) for t in result.trials if t.measurement.oom})
            raise NoRunningConfiguration(_trial_history(result),
                f"optimizer {name!r} found no configuration that runs within the node's memory budget "
                f"({node.ram_budget_mb:,.0f} MB) in {tuning_s:.0f} s ({len(result.trials)} trials; failures: "
                f"{'; '.join(reasons)[:500] or 'none'}); fix the pipeline, or raise the time budget or the node's RAM"
            )
        chosen, final_m = recommendation(opt, result)
        if final is not None:
            final_m = w.measure(chosen, **final.as_kwargs()) if w is not None else measure_in_process(spec, chosen, **final.as_kwargs())
    finally:
        if own_worker and w is not None:
            w.close()
    controls_info = ({"controls": controls, "controls_s": round(controls_s, 2), "control_config": dict(control),
                      "control_every": control_every} if control is not None else {})
    return IngestTuningResult(
        optimizer=name,
        pipeline=spec.name,
        config=chosen,
        rows_per_s=final_m.rows_per_s,
        peak_rss_mb=final_m.peak_rss_mb,
        tuning_s=tuning_s,
        label=final_m.label,
        oom=final_m.oom,
        final_measurement={"protocol": (final or search).as_kwargs(), **dict(final_m.extra)},
        search=_search_summary(result, search, time_budget_s, controls_info),
        node={"name": node.name, "vcpus": node.vcpus, "ram_gib": node.ram_gib, "hourly_usd": node.hourly_usd},
    )


def _search_summary(
    result: SearchResult, search: MeasureProtocol, time_budget_s: float, controls: dict[str, Any]
) -> dict[str, Any]:
    """The search part of a tuning result: trials, why it stopped, protocol, controls and history."""
    assert result.best is not None
    return {
        "trials": len(result.trials),
        "stopped_by": result.stopped_by,
        "best_trial_rows_per_s": result.best.rows_per_s,
        "protocol": search.as_kwargs(),
        "time_budget_s": time_budget_s,
        **controls,
        "failed_trials": _failures(result.trials),
        "history": _trial_history(result),
    }


def _trial_history(result: SearchResult) -> list[dict[str, Any]]:
    """Every trial of a search, in order: configuration, measurement and failure reason."""
    return [
        {"config": t.config, "rows_per_s": t.measurement.rows_per_s, "peak_rss_mb": t.measurement.peak_rss_mb,
         "oom": t.measurement.oom, "label": t.measurement.label, "elapsed_s": t.elapsed_s, **t.measurement.cores,
         **({"failure": t.measurement.extra["failure"]} if "failure" in t.measurement.extra else {})}
        for t in result.trials
    ]


class NoRunningConfiguration(UserError):
    """An optimizer's search ended without a configuration that runs; ``history`` holds its trials
    (in :func:`_trial_history`'s form), so a benchmark can report the run instead of losing it."""

    def __init__(self, history: list[dict[str, Any]], message: str):
        super().__init__(message)
        self.history = history


@dataclass(frozen=True)
class TuningFailure:
    """An optimizer that found no configuration that runs (a baseline that is reported, not fatal)."""

    optimizer: str
    error: str
    config: None = None

    def to_json(self) -> dict[str, Any]:
        return {"optimizer": self.optimizer, "config": None, "error": self.error}


@dataclass(frozen=True)
class VerifiedConfig:
    """One chosen configuration measured afresh on the live pipeline with the verification protocol."""

    optimizer: str
    config: Config
    rows_per_s: float
    peak_rss_mb: float
    oom: bool
    label: str
    spread: float | None
    protocol: dict[str, Any]

    def to_json(self) -> dict[str, Any]:
        return asdict(self)


def verify_protocol(window_s: float | None = None, repeats: int | None = None) -> MeasureProtocol:
    """The final protocol, with the window and the number of windows overridden where given."""
    return MeasureProtocol(
        warmup_s=FINAL_PROTOCOL.warmup_s,
        window_s=float(window_s) if window_s else FINAL_PROTOCOL.window_s,
        repeats=int(repeats) if repeats else FINAL_PROTOCOL.repeats,
    )


def verify_configurations(
    spec: PipelineSpec,
    node: Node,
    chosen: list[IngestTuningResult | TuningFailure],
    protocol: MeasureProtocol,
    on_verified: Callable[[VerifiedConfig], None] | None = None,
) -> list[VerifiedConfig]:
    """Measure every chosen configuration (failures skipped) in one worker, with one protocol."""
    out = []
    with MeasureWorker(spec, memory_limit_mb=node.ram_budget_mb) as worker:
        for c in chosen:
            if c.config is None:
                continue
            m = worker.measure(c.config, **protocol.as_kwargs())
            verified = VerifiedConfig(c.optimizer, dict(c.config), m.rows_per_s, m.peak_rss_mb, m.oom, m.label,
                                      m.extra.get("spread"), protocol.as_kwargs())
            if on_verified is not None:
                on_verified(verified)
            out.append(verified)
    return out
