"""InTune tasks, one per stage of the flow: locate or generate data, calibrate (profile) the
pipeline, tune it with one optimizer, verify the chosen configurations on the live pipeline,
and the report section. Thin wrappers over ``ingestion`` and ``optimizers``; they take and
return typed values (:class:`IngestData`, the spec's :class:`~optimizers.spec.IngestSpec`,
:class:`~optimizers.tuning.IngestTuningResult`, :class:`~optimizers.tuning.VerifiedConfig`).
The spec is the ingestion request (:class:`~optimizers.ingest_request.IngestRequest`), so the
node, the pipeline and the tuning job come from it as ``ingest tune`` makes them
(``ing.job(...)``; verification: ``ing.node()``, ``ing.pipeline(...)``).

The pipeline profile (per-stage costs the simulator and InTune's agent learn from) is
cached like Seraph's: keyed on the data (its manifest and format), the node, the batch
size, the bad-row policy, the hardware and this module's task code; it is stored as JSON,
so the cached task returns the calibration's JSON form. Every optimizer that uses a calibration gets this
one (InTune does not calibrate again). Generated data is reused by its own fingerprint
(rows, seed, format): generating it again would give the same bytes.
"""

from __future__ import annotations

import json
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from prefect import get_run_logger, task

from tasks.caching import PROFILE_CACHE_POLICY
from tasks import timeouts
from tasks.measure import one_measurement_at_a_time
from tasks.progress import Progress, ReportingWorker
from tasks.report import ReportSection, fmt, md_table, section, table_artifact
from tasks.retry import EXTERNAL_RETRIES
from core import paths
from core.errors import UserError
from core.json_edge import JsonObject
from optimizers.spec import DataSpec, IngestSpec
from optimizers.tuning import IngestTuningResult, TuningFailure, VerifiedConfig

DATA_FORMAT = "tsv"  # Criteo's own text format


@dataclass(frozen=True)
class IngestData:
    """The data folder tuned on: where it is, whether it was generated now or reused, its
    shard files and their format (listed once here; every later task builds the pipeline over
    this list)."""

    path: str
    generated: bool
    reused: bool
    manifest: JsonObject = field(default_factory=dict)  # the data's manifest file (ingestion.datagen)
    shards: tuple[str, ...] = ()
    format: str = DATA_FORMAT

    @property
    def rows(self) -> Any:
        return self.manifest.get("rows")


@task(name="locate-or-generate-data", **EXTERNAL_RETRIES)
def locate_or_generate_data(data: DataSpec, fmt: str | None = None) -> IngestData:
    """The data folder to tune on: the user's (checked; its shards in ``fmt``, or the format
    detected), or generated Criteo-format rows under ``.trainwise/data/`` (in ``fmt``, by
    default Criteo's own TSV; reused when the same rows, format and seed exist)."""
    from ingestion.datagen import MANIFEST, generate

    logger = get_run_logger()
    if data.path:
        folder = Path(data.path).expanduser().resolve()
        if not folder.is_dir():
            raise UserError(f"ingestion.data.path {folder} is not a folder; give a folder of Criteo shards or drop path to generate data")
        manifest_file = folder / MANIFEST
        manifest = json.loads(manifest_file.read_text()) if manifest_file.is_file() else {}
        logger.info("data: using %s", folder)
        return _found(folder, fmt, generated=False, reused=True, manifest=manifest)
    fmt = fmt or DATA_FORMAT
    folder = paths.cache_dir("data") / f"criteo-{fmt}-{data.rows}-seed{data.seed}"
    manifest_file = folder / MANIFEST
    if manifest_file.is_file():
        logger.info("data cached: reusing %s (%s rows)", folder, data.rows)
        return _found(folder, fmt, generated=True, reused=True, manifest=json.loads(manifest_file.read_text()))
    if folder.exists():  # an interrupted earlier generation: start clean
        import shutil

        shutil.rmtree(folder)
    manifest = generate(data.rows, fmt, folder, seed=data.seed)
    logger.info("data: generated %s rows into %s", data.rows, folder)
    return _found(folder, fmt, generated=True, reused=False, manifest=manifest)


def _found(folder: Path, fmt: str | None, *, generated: bool, reused: bool, manifest: JsonObject) -> IngestData:
    """The folder as :class:`IngestData`, its shards listed (in ``fmt``, or the format detected)."""
    from ingestion.dlrm import list_shards

    shards, fmt = list_shards(folder, fmt)
    return IngestData(str(folder), generated=generated, reused=reused, manifest=manifest, shards=tuple(shards),
                      format=fmt)


def pipeline_workload_of(ing: IngestSpec, data: IngestData) -> JsonObject:
    """What a pipeline profile depends on (its cache key): the data (by manifest, so
    regenerated identical data keeps its profile, and format), the node, the batch size, the
    bad-row policy and the profiling window."""
    manifest = {k: v for k, v in data.manifest.items() if k != "out"}
    return {
        "data_path": data.path,
        "data_manifest": paths.fingerprint(manifest) if manifest else None,
        "format": data.format,
        "node": asdict(ing.node()),
        "batch_size": ing.batch_size,
        "on_bad_row": ing.on_bad_row,
        "window_s": ing.profile_window_s,
    }


@task(
    name="profile-pipeline",
    cache_policy=PROFILE_CACHE_POLICY,
    result_serializer="json",
    persist_result=True,
    timeout_seconds=timeouts.PROFILE_PIPELINE_S,
    **EXTERNAL_RETRIES,
)
@one_measurement_at_a_time
def profile_pipeline(workload: JsonObject) -> JsonObject:
    """Time each prefix of the pipeline and a few parallel configurations, and fit the
    simulator to them (``ingestion.calibrate``); return the calibration as JSON. Prefect's
    cache decides whether to profile, so the library's own file cache is bypassed here
    (``use_cache=False``) and refreshed."""
    from ingestion.calibrate import calibrate
    from ingestion.dlrm import dlrm_spec
    from ingestion.node import Node

    node = Node(**workload["node"])
    spec = dlrm_spec(workload["data_path"], workload["format"], node, (workload["batch_size"],), workload["on_bad_row"])
    cal = calibrate(spec, node, use_cache=False, window_s=workload["window_s"])
    get_run_logger().info(
        "calibrated the pipeline simulator in %s s; fit error %s on %d points",
        fmt(cal.calibration_s), fmt(cal.fit_error), len(cal.fit_points),
    )
    return cal.to_json()


def _calibration_loader(profile: JsonObject) -> Any:
    """The cached profile in the form the optimizers take: a callable, called only by
    the optimizers that use a calibration (plumber, intune)."""

    def load() -> Any:
        from ingestion.calibrate import Calibration

        return Calibration.from_json(profile)

    return load


def _progress_reporter(progress: Progress, optimizer: str, position: tuple[int, int], budget: float) -> Any:
    index, count = position
    started = time.monotonic()

    def report(m: Any) -> None:
        elapsed = time.monotonic() - started
        progress.update(
            (index + min(elapsed / budget, 1.0)) / count,
            f"{optimizer} ({index + 1}/{count}): {fmt(elapsed)} s of {fmt(budget)}, last {fmt(m.rows_per_s)} rows/s ({m.label})",
        )

    return report


@task(name="tune-pipeline", timeout_seconds=timeouts.TUNE_DEFAULT_S)  # the flow passes tune_timeout_s
@one_measurement_at_a_time
def tune_ingestion(
    optimizer: str,
    data: IngestData,
    profile: JsonObject,
    ing: IngestSpec,
    progress_key: str,
    position: tuple[int, int] = (0, 1),
    required: bool = True,
) -> IngestTuningResult | TuningFailure:
    """Run one optimizer (InTune or a baseline) within the time budget on the live
    pipeline, from the calibration task's profile; return its chosen configuration and
    what it measured while searching. (Verification, with the same longer protocol for
    every optimizer, is the next task.) A baseline that finds nothing (``required=False``)
    is reported as a :class:`TuningFailure`, not fatal."""
    from ingestion.measure import MeasureWorker
    from optimizers.tuning import TuningOptions, tune_pipeline

    index, count = position
    progress = Progress(progress_key, f"InTune: tuning with {optimizer} ({index + 1}/{count})")
    job = ing.job(data.path, data.format, data.shards, final=None, calibration=_calibration_loader(profile))
    # Every trial goes through this worker (started at its first trial), so each measurement
    # updates the progress artifact.
    worker = ReportingWorker(MeasureWorker(job.spec, memory_limit_mb=job.node.ram_budget_mb),
                             _progress_reporter(progress, optimizer, position, ing.time_budget_s))
    try:
        result = tune_pipeline(job, optimizer, TuningOptions(worker=worker, progress=False))
    except UserError as exc:
        if required:
            raise
        get_run_logger().warning("baseline %s failed: %s", optimizer, exc)
        return TuningFailure(optimizer, str(exc))
    finally:
        worker.close()
    progress.update((index + 1) / count, f"{optimizer}: done, best trial {fmt(result.rows_per_s)} rows/s")
    return result


@task(name="measure-configurations", timeout_seconds=timeouts.VERIFY_DEFAULT_S, **EXTERNAL_RETRIES)
@one_measurement_at_a_time
def measure_configurations(
    data: IngestData, chosen: list[IngestTuningResult | TuningFailure], ing: IngestSpec
) -> list[VerifiedConfig]:
    """Verify each optimizer's chosen configuration on the live pipeline: one worker
    process, the same (longer) protocol for all, measured."""
    from optimizers.tuning import verify_configurations, verify_protocol

    node = ing.node()
    spec = ing.pipeline(data.path, data.format, data.shards, node)
    logger = get_run_logger()
    return verify_configurations(
        spec, node, chosen, verify_protocol(ing.verify_window_s, ing.verify_repeats),
        on_verified=lambda v: logger.info("verified %s: %s rows/s (measured)", v.optimizer, fmt(v.rows_per_s)),
    )


def _tuned_row(t: IngestTuningResult | TuningFailure, v: VerifiedConfig | None, ratio_col: str,
               base: float | None) -> JsonObject:
    """One optimizer's row of the comparison table."""
    ok = isinstance(t, IngestTuningResult)
    verified = v.rows_per_s if v is not None else None
    return {
        "optimizer": t.optimizer,
        "tuning_rows_per_s": t.rows_per_s if ok else None,
        "tuning_label": t.label if ok else None,
        "verified_rows_per_s": verified,
        ratio_col: verified / base if base and verified is not None else None,
        "trials": t.search.get("trials") if ok else None,
        "tuning_s": t.tuning_s if ok else None,
        "peak_rss_mb": v.peak_rss_mb if v is not None else None,
        "config": json.dumps(t.config, sort_keys=True) if t.config else f"failed: {getattr(t, 'error', None)}",
    }


@task(name="render-intune-section")
def render_intune_section(
    name: str,
    ing: IngestSpec,
    data: IngestData,
    tuned: list[IngestTuningResult | TuningFailure],
    verified: list[VerifiedConfig],
    profile_cached: bool,
    run_dir: str,
) -> ReportSection:
    """The throughput plot, the optimizer comparison table artifact and the markdown."""
    from tasks.plots import throughput_png

    out = Path(run_dir)
    live = {v.optimizer: v for v in verified}
    # The reference for the ratio column: tf.data's AUTOTUNE if it ran, else the first baseline.
    ref = next((b for b in ["autotune", *ing.baselines] if b in live and b != ing.optimizer), None)
    ratio_col = f"vs_{ref}" if ref else "vs_baseline"
    base = live[ref].rows_per_s if ref else None
    rows = [_tuned_row(t, live.get(t.optimizer), ratio_col, base) for t in tuned]
    plot = throughput_png(rows, out / "intune" / "throughput.png", title="rows/s per optimizer")
    table_artifact(f"{name}-intune-optimizers", rows, "InTune vs baselines: rows/s while tuning and verified live")
    chosen = next(r for r in rows if r["optimizer"] == ing.optimizer)
    cols = ["optimizer", "verified_rows_per_s", ratio_col, "tuning_rows_per_s", "tuning_label", "trials", "tuning_s", "peak_rss_mb"]
    md = f"""
**Tuned:** the CPU split across the DLRM tf.data pipeline's stages (read, parse, transform
parallelism; shuffle and prefetch buffers) on {ing.node().vcpus} threads, batch {ing.batch_size},
data `{data.path}` ({fmt(data.rows)} rows, {'reused' if data.reused else 'generated now'}).

**Profile:** {'cached (reused)' if profile_cached else 'measured (not cached)'}.

**Chosen configuration ({ing.optimizer}):** `{chosen['config']}`, verified on the live pipeline at
{fmt(chosen['verified_rows_per_s'])} rows/s (measured){f", {chosen[ratio_col]:.2f}x {ref}" if chosen.get(ratio_col) else ''}.

Each optimizer had {fmt(ing.time_budget_s)} s; "tuning" figures are what it saw while searching (labelled
simulated or measured); "verified" figures are all measured afresh on the live pipeline
({verified[0].protocol['repeats'] if verified else '-'} windows of {fmt(verified[0].protocol['window_s'] if verified else None)} s after a warm-up, median).

{md_table(rows, cols)}

![rows/s per optimizer](intune/throughput.png)
"""
    summary = {"chosen": chosen, "optimizers": rows, "data": data.path}
    return section("intune", "InTune: ingestion pipeline", md, plots=[plot], summary=summary, profile_cached=profile_cached)
