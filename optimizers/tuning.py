"""Tuning a pipeline on the live machine: the loop behind ``trainwise ingest tune``.

Everything a run needs travels in one :class:`~optimizers.ingestion_optimizers.IngestJob`
(pipeline, node, one time budget, seed, protocols), made where the run starts:

1. build the optimizer (its construction draws from the job's budget: a model-based
   optimizer may profile the pipeline first);
2. ask/tell for what is left of the budget, every trial measured in one persistent worker
   subprocess (:class:`~ingestion.measure.MeasureWorker`) with a short window;
3. take the optimizer's recommendation (``recommendation``: the best search trial unless the
   optimizer keeps its own estimate) and re-measure it with a longer, repeated window (the *final*
   measurement). The reported ``rows_per_s`` and ``peak_rss_mb`` come from this final
   measurement, never from the search's best trial: the best of many noisy short
   trials is biased upwards, and every optimizer gets the same final protocol, so the
   figures compare fairly.

``tuning_s`` is wall time from the start of the job's budget to the end of step 2 (the final
measurement is verification, not tuning).

**Against AUTOTUNE** (:class:`TuningOptions`' ``autotune_rounds``, what ``ingest tune`` sets): after
the final measurement, the pick and tf.data AUTOTUNE are measured in the same worker, interleaved,
``autotune_rounds`` rounds (:func:`optimizers.baselines.autotune.compare_with_autotune`); the
result's ``vs_autotune`` is their paired ratio with its interval. Two separate ``tune`` runs would
compare two processes at two times, where the machine's own drift decides the ratio as much as
the tuner does. Verification too: not in ``tuning_s``.

**Control measurements** (:class:`TuningOptions`' ``control``, used by the benchmark's grid): a fixed configuration
measured in the same worker with the same protocol before every ``control_every``-th trial and
once after the last, so a drift of the machine's speed during a long search is measured. They
are not trials: the optimizer never sees them, they are not in ``history``, and no trial's
rows/s is rescaled by them; they are listed in ``search["controls"]`` (their time is in
``tuning_s``, and separately in ``search["controls_s"]``).
"""

from __future__ import annotations

import sys
import time
from dataclasses import asdict, dataclass, replace
from typing import TYPE_CHECKING, Any, Callable, NotRequired, TypedDict

from ingestion.measure import MeasureWorker, measure_in_process
from ingestion.measurement import (FINAL_PROTOCOL, SEARCH_PROTOCOL, Config, Cores, Measurement, MeasurementExtra,
                                   MeasureProtocol)
from ingestion.node import Node
from ingestion.pipeline import PipelineSpec
from optimizers.asktell import Optimizer, SearchResult, Trial, run
from optimizers.ingestion_optimizers import INGESTION_OPTIMIZERS, IngestJob
from core.errors import UserError
from core.json_edge import JsonObject

if TYPE_CHECKING:  # pragma: no cover  (InTune's state module loads its agent's engine)
    from optimizers.intune.state import RaceReport

__all__ = ["FINAL_PROTOCOL", "SEARCH_PROTOCOL", "IngestJob", "IngestTuningResult", "MeasureProtocol",
           "NoRunningConfiguration", "TuningOptions", "VerifiedConfig", "build_optimizer", "tune_pipeline"]


def recommendation(opt: Any, result: Any) -> tuple[Config, Measurement]:
    """The configuration an optimizer recommends and its search measurement: its own ``best``
    (configuration, measurement) if it keeps one (InTune measures its closest candidates again
    and recommends by the mean), else the best single trial of the search."""
    own = getattr(opt, "best", None)
    if isinstance(own, tuple) and len(own) == 2 and own[0] is not None and not own[1].failed:
        return dict(own[0]), own[1]
    return dict(result.best_config), result.best


class _Figures(Cores):
    """What one measurement of the search showed: rows/s, whether it ran, the cores busy meanwhile."""

    rows_per_s: float
    oom: bool
    label: str


class TrialRow(_Figures):
    """One trial of a search as the result's ``history`` lists it (:func:`_trial_history`)."""

    config: Config
    peak_rss_mb: float
    elapsed_s: float
    failure: NotRequired[str]  # why a failed trial failed


class ControlRow(_Figures):
    """One control measurement: before which trial, and when in the run."""

    before_trial: int
    elapsed_s: float


class FinalMeasurement(MeasurementExtra, total=False):
    """The final measurement's protocol and its own figures (``Measurement.extra``)."""

    protocol: dict[str, float | int]  # MeasureProtocol.as_kwargs()


class SearchSummary(TypedDict, total=False):
    """The search part of a tuning result (:func:`_search_summary`): its trials, why it stopped,
    its protocol and history; the control measurements when asked for, and InTune's final race."""

    trials: int
    stopped_by: str
    best_trial_rows_per_s: float
    protocol: dict[str, float | int]  # MeasureProtocol.as_kwargs()
    time_budget_s: float
    failed_trials: dict[str, int]
    history: list[TrialRow]
    controls: list[ControlRow]
    controls_s: float
    control_config: dict[str, int]
    control_every: int
    race: RaceReport  # the optimizer's own report of its race (InTune's)


class NodeSummary(TypedDict):
    """The node a pipeline was tuned on, as the result names it."""

    name: str
    vcpus: int
    ram_gib: float
    hourly_usd: float


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
    final_measurement: FinalMeasurement
    search: SearchSummary
    node: NodeSummary
    vs_autotune: Any = None

    def to_json(self) -> JsonObject:
        return asdict(self)


def calibration_for(spec: PipelineSpec, node: Node) -> Callable[[], Any]:
    """The pipeline's calibration, made when first asked for (cached per data and hardware):
    what ``tune_pipeline`` gives an optimizer that requires one when the caller gave none."""

    def load() -> Any:
        from ingestion.calibrate import calibrate

        return calibrate(spec, node)

    return load


def build_optimizer(job: IngestJob, optimizer: str | Optimizer) -> Optimizer:
    """``optimizer`` itself if already built, else the registry's for ``job``, calibrated (by
    :func:`calibration_for`) if it requires a calibration and the job carries none."""
    if not isinstance(optimizer, str):
        return optimizer
    entry = INGESTION_OPTIMIZERS.get(optimizer)
    if job.calibration is None and entry.needs_calibration:
        job = replace(job, calibration=calibration_for(job.spec, job.node))
    return entry.factory(job)


@dataclass(frozen=True)
class TuningOptions:
    """How a tuning run is watched, not what it tunes: ``worker`` (a measurement worker to use;
    None: one is made and closed here for a portable pipeline, else trials run in this process),
    ``progress`` (one line per trial on stderr), the benchmark's control measurements:
    ``control`` (a configuration measured before every ``control_every``-th trial and after the
    last; None: none), and ``autotune_rounds`` (rounds of the pick against AUTOTUNE side by side
    after the final measurement; 0: none)."""

    worker: Any = None
    progress: bool = True
    control: Config | None = None
    control_every: int = 10
    autotune_rounds: int = 0


class _Measurements:
    """Every measurement of one tuning run, in one worker (or in this process): the trials, the
    control measurements interleaved with them, and the final measurement."""

    def __init__(self, job: IngestJob, worker: Any, options: TuningOptions):
        self.job, self.worker, self.options = job, worker, options
        self.trials_done = 0
        self.controls: list[ControlRow] = []
        self.controls_s = 0.0

    def measure(self, config: Config, protocol: MeasureProtocol) -> Measurement:
        if self.worker is not None:
            return self.worker.measure(config, **protocol.as_kwargs())
        return measure_in_process(self.job.spec, config, **protocol.as_kwargs())

    def _controlled(self) -> bool:
        return self.options.control is not None and self.options.control_every > 0

    def control(self) -> None:
        """One control measurement (not a trial: the optimizer never sees it)."""
        t = time.monotonic()
        m = self.measure(dict(self.options.control or {}), self.job.search)
        self.controls_s += time.monotonic() - t
        self.controls.append({"before_trial": self.trials_done, "elapsed_s": round(t - self.job.budget.started, 2),
                              "rows_per_s": m.rows_per_s, "oom": m.failed, "label": m.label, **m.cores})

    def trial(self, config: Config) -> Measurement:
        if self._controlled() and self.trials_done % self.options.control_every == 0:
            self.control()
        self.trials_done += 1
        return self.measure(config, self.job.search)

    def closing_control(self) -> None:
        if self._controlled() and self.trials_done:
            self.control()

    def controls_info(self) -> SearchSummary:
        if self.options.control is None:
            return {}
        return {"controls": self.controls, "controls_s": round(self.controls_s, 2),
                "control_config": dict(self.options.control), "control_every": self.options.control_every}


def tune_pipeline(job: IngestJob, optimizer: str | Optimizer, options: TuningOptions = TuningOptions()
                  ) -> IngestTuningResult:
    """Tune ``job``'s pipeline on its node with ``optimizer`` within its budget (see the module doc).

    ``optimizer`` is a registry name (``optimizers.ingestion_optimizers.INGESTION_OPTIMIZERS``),
    or an ask/tell optimizer already built (e.g. a grid in another order), named by its ``name``.
    An optimizer that requires a calibration and gets none from the job calibrates the pipeline
    here (:func:`calibration_for`)."""
    name = optimizer if isinstance(optimizer, str) else optimizer.name
    own_worker = options.worker is None and job.spec.portable
    worker = MeasureWorker(job.spec, memory_limit_mb=job.node.ram_budget_mb) if own_worker else options.worker
    measurements = _Measurements(job, worker, options)
    try:
        opt = build_optimizer(job, optimizer)
        result = _search(job, opt, measurements.trial, options.progress)
        measurements.closing_control()
        tuning_s = job.budget.elapsed()
        _require_a_running_configuration(job, name, result, tuning_s)
        chosen, final_m = recommendation(opt, result)
        if job.final is not None:
            final_m = measurements.measure(chosen, job.final)
        versus = _versus_autotune(job, name, chosen, measurements, options.autotune_rounds)
    finally:
        if own_worker and worker is not None:
            worker.close()
    return IngestTuningResult(
        optimizer=name,
        pipeline=job.spec.name,
        config=chosen,
        rows_per_s=final_m.rows_per_s,
        peak_rss_mb=final_m.peak_rss_mb,
        tuning_s=tuning_s,
        label=final_m.label,
        oom=final_m.failed,
        final_measurement={"protocol": (job.final or job.search).as_kwargs(), **dict(final_m.extra)},
        search={**_search_summary(result, job, measurements.controls_info()), **_race(opt)},
        node={"name": job.node.name, "vcpus": job.node.vcpus, "ram_gib": job.node.ram_gib,
              "hourly_usd": job.node.hourly_usd},
        vs_autotune=versus,
    )


def _race(opt: Any) -> SearchSummary:
    """How an optimizer that races its finalists at the end (InTune) decided its pick, under
    ``race`` (rounds, who left and why, buffer knobs memory held down); nothing for the others."""
    report = getattr(opt, "report", None)
    race = report().get("race") if callable(report) else None
    return {"race": race} if race else {}


def _versus_autotune(job: IngestJob, name: str, chosen: Config, measurements: "_Measurements", rounds: int) -> Any:
    """The pick against AUTOTUNE side by side (None when not asked for, or when the pick is
    AUTOTUNE's own configuration)."""
    from optimizers.baselines.autotune import autotune_config, compare_with_autotune

    if rounds < 1 or name == "autotune" or dict(chosen) == autotune_config(job.spec):
        return None
    return compare_with_autotune(measurements.measure, chosen, job.spec, rounds)


def _search(job: IngestJob, opt: Optimizer, evaluate: Callable[[Config], Measurement], progress: bool) -> SearchResult:
    """Ask/tell for what is left of the job's budget. When the optimizer's set-up (calibration,
    agent loading) used the whole budget, its first proposal is measured anyway rather than
    return nothing; ``tuning_s`` shows the overrun."""
    on_trial = _progress if progress else None
    result = run(opt, evaluate, time_budget_s=job.budget.remaining(), max_trials=job.max_trials, on_trial=on_trial)
    if not result.trials:
        setup_s = job.budget.elapsed()
        result = run(opt, evaluate, max_trials=1, on_trial=on_trial)
        result.stopped_by = f"time budget (optimizer set-up took {setup_s:.0f} s; one trial measured past it)"
    return result


def _require_a_running_configuration(job: IngestJob, name: str, result: SearchResult, tuning_s: float) -> None:
    """Raise :class:`NoRunningConfiguration` when the search found nothing that runs."""
    if result.best_config is not None and result.best is not None and not result.best.failed:
        return
    reasons = sorted({str(t.measurement.extra.get("failure")) for t in result.trials if t.measurement.failed})
    raise NoRunningConfiguration(_trial_history(result),
        f"optimizer {name!r} found no configuration that runs within the node's memory budget "
        f"({job.node.ram_budget_mb:,.0f} MB) in {tuning_s:.0f} s ({len(result.trials)} trials; failures: "
        f"{'; '.join(reasons)[:500] or 'none'}); fix the pipeline, or raise the time budget or the node's RAM"
    )


def _progress(trial: Trial) -> None:
    m = trial.measurement
    figure = "OOM/failed" if m.failed else f"{m.rows_per_s:,.0f} rows/s, {m.peak_rss_mb:,.0f} MB"
    print(f"  [{trial.elapsed_s:6.1f}s] {figure}  {trial.config}", file=sys.stderr, flush=True)


def _failures(trials: list[Trial]) -> dict[str, int]:
    """How many trials failed, by reason (out of memory, a hung or dead worker, a pipeline error)."""
    counts: dict[str, int] = {}
    for t in trials:
        if t.measurement.failed:
            reason = str(t.measurement.extra.get("failure", "out of memory")).split(":")[0]
            counts[reason] = counts.get(reason, 0) + 1
    return counts


def _search_summary(result: SearchResult, job: IngestJob, controls: SearchSummary) -> SearchSummary:
    """The search part of a tuning result: trials, why it stopped, protocol, controls and history."""
    assert result.best is not None
    return {
        "trials": len(result.trials),
        "stopped_by": result.stopped_by,
        "best_trial_rows_per_s": result.best.rows_per_s,
        "protocol": job.search.as_kwargs(),
        "time_budget_s": job.budget.total_s,
        **controls,
        "failed_trials": _failures(result.trials),
        "history": _trial_history(result),
    }


def _trial_history(result: SearchResult) -> list[TrialRow]:
    """Every trial of a search, in order: configuration, measurement and failure reason."""
    return [
        {"config": t.config, "rows_per_s": t.measurement.rows_per_s, "peak_rss_mb": t.measurement.peak_rss_mb,
         "oom": t.measurement.failed, "label": t.measurement.label, "elapsed_s": t.elapsed_s, **t.measurement.cores,
         **({"failure": t.measurement.extra["failure"]} if "failure" in t.measurement.extra else {})}
        for t in result.trials
    ]


class NoRunningConfiguration(UserError):
    """An optimizer's search ended without a configuration that runs; ``history`` holds its trials
    (in :func:`_trial_history`'s form), so a benchmark can report the run instead of losing it."""

    def __init__(self, history: list[TrialRow], message: str):
        super().__init__(message)
        self.history = history


@dataclass(frozen=True)
class TuningFailure:
    """An optimizer that found no configuration that runs (a baseline that is reported, not fatal)."""

    optimizer: str
    error: str
    config: None = None

    def to_json(self) -> JsonObject:
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
    protocol: dict[str, float | int]  # MeasureProtocol.as_kwargs()

    def to_json(self) -> JsonObject:
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
            verified = VerifiedConfig(c.optimizer, dict(c.config), m.rows_per_s, m.peak_rss_mb, m.failed, m.label,
                                      m.extra.get("spread"), protocol.as_kwargs())
            if on_verified is not None:
                on_verified(verified)
            out.append(verified)
    return out
