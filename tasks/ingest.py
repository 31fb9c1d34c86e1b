"""InTune tasks: locate or generate data, profile the pipeline, tune it with one
optimizer, measure a configuration on the live pipeline, and the report section.
Thin wrappers over ``ingestion`` and ``optimizers``.

The pipeline profile (per-stage costs the simulator and InTune's agent learn from) is
cached like Seraph's: keyed on the data (its manifest), the CPU budget, the batch
size, the hardware and this module's task code. Generated data is reused by its own
fingerprint (rows, seed, format): generating it again would give the same bytes.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from prefect import get_run_logger, task

from tasks.caching import PROFILE_CACHE_POLICY
from tasks.progress import Progress
from tasks.report import fmt, md_table, section, table_artifact
from tasks.retry import EXTERNAL_RETRIES
from trainwise import paths
from trainwise.errors import UserError
from trainwise.spec import IngestSpec

DATA_FORMAT = "tsv"  # Criteo's own text format


@task(name="locate-or-generate-data", **EXTERNAL_RETRIES)
def locate_or_generate_data(data: dict[str, Any]) -> dict[str, Any]:
    """The data folder to tune on: the user's (checked), or generated Criteo-format
    rows under ``.trainwise/data/`` (reused when the same rows and seed exist)."""
    from ingestion.datagen import MANIFEST, generate

    logger = get_run_logger()
    if data.get("path"):
        folder = Path(data["path"]).expanduser().resolve()
        if not folder.is_dir():
            raise UserError(f"ingestion.data.path {folder} is not a folder; give a folder of Criteo shards or drop path to generate data")
        manifest_file = folder / MANIFEST
        manifest = json.loads(manifest_file.read_text()) if manifest_file.is_file() else {}
        logger.info("data: using %s", folder)
        return {"path": str(folder), "generated": False, "reused": True, "manifest": manifest}
    folder = paths.cache_dir("data") / f"criteo-{DATA_FORMAT}-{data['rows']}-seed{data['seed']}"
    manifest_file = folder / MANIFEST
    if manifest_file.is_file():
        logger.info("data cached: reusing %s (%s rows)", folder, data["rows"])
        return {"path": str(folder), "generated": True, "reused": True, "manifest": json.loads(manifest_file.read_text())}
    if folder.exists():  # an interrupted earlier generation: start clean
        import shutil

        shutil.rmtree(folder)
    manifest = generate(data["rows"], DATA_FORMAT, folder, seed=data["seed"])
    logger.info("data: generated %s rows into %s", data["rows"], folder)
    return {"path": str(folder), "generated": True, "reused": False, "manifest": manifest}


def pipeline_workload_of(ing: IngestSpec, data: dict[str, Any]) -> dict[str, Any]:
    """What a pipeline profile depends on (its cache key): the data (by manifest, so
    regenerated identical data keeps its profile), the CPU budget and the batch size."""
    manifest = {k: v for k, v in data.get("manifest", {}).items() if k != "out"}
    return {
        "data_path": data["path"],
        "data_manifest": paths.fingerprint(manifest) if manifest else None,
        "cpu_budget": ing.cpu_budget,
        "batch_size": ing.batch_size,
    }


def _node(cpu_budget: int | None) -> dict[str, Any]:
    from ingestion.node import this_machine

    n = this_machine()
    return {"name": n.name, "vcpus": cpu_budget or n.vcpus, "ram_gib": n.ram_gib, "hourly_usd": n.hourly_usd}


def _pipeline(data_path: str, cpu_budget: int | None, batch_size: int) -> Any:
    from ingestion.dlrm import dlrm_spec

    return dlrm_spec(data_path, DATA_FORMAT, node=_node(cpu_budget), batch_sizes=(batch_size,))


@task(
    name="profile-pipeline",
    cache_policy=PROFILE_CACHE_POLICY,
    result_serializer="json",
    persist_result=True,
    **EXTERNAL_RETRIES,
)
def profile_pipeline(workload: dict[str, Any]) -> dict[str, Any]:
    """Measure the pipeline's per-stage costs and fit the simulator to them (JSON)."""
    from ingestion import calibrate

    spec = _pipeline(workload["data_path"], workload["cpu_budget"], workload["batch_size"])
    model = calibrate.calibrate(spec, _node(workload["cpu_budget"]))
    return model if isinstance(model, dict) else model.as_dict()


@task(name="tune-pipeline")
def tune_pipeline(
    optimizer: str,
    data: dict[str, Any],
    profile: dict[str, Any],
    ing: dict[str, Any],
    progress_key: str,
) -> dict[str, Any]:
    """Run one optimizer (InTune or a baseline) within the time budget; return its
    chosen configuration and the throughput it saw while tuning (labelled)."""
    from optimizers import intune

    progress = Progress(progress_key, f"InTune: tuning with {optimizer}")
    budget = float(ing["time_budget_s"])

    def on_trial(trial: Any) -> None:
        progress.update(
            trial.elapsed_s / budget,
            f"{optimizer}: trial {fmt(trial.elapsed_s)} s, {fmt(trial.measurement.rows_per_s)} rows/s ({trial.measurement.label})",
        )

    spec = _pipeline(data["path"], ing["cpu_budget"], ing["batch_size"])
    result = intune.tune(
        spec,
        _node(ing["cpu_budget"]),
        optimizer,
        time_budget_s=budget,
        seed=ing["seed"],
        calibration=profile,
        on_trial=on_trial,
    )
    progress.done(f"{optimizer}: done, {fmt(result.get('rows_per_s'))} rows/s")
    return result


@task(name="measure-configuration", **EXTERNAL_RETRIES)
def measure_configuration(data: dict[str, Any], config: dict[str, int], ing: dict[str, Any], label: str) -> dict[str, Any]:
    """Measure ``config`` on the live pipeline (fresh worker process; measured)."""
    from ingestion.measure import measure

    spec = _pipeline(data["path"], ing["cpu_budget"], ing["batch_size"])
    m = measure(spec, config, window_s=float(ing["verify_window_s"]), repeats=int(ing["verify_repeats"]))
    get_run_logger().info("verified %s: %s rows/s (measured)", label, fmt(m.rows_per_s))
    return {
        "optimizer": label,
        "config": dict(config),
        "rows_per_s": m.rows_per_s,
        "peak_rss_mb": m.peak_rss_mb,
        "oom": m.oom,
        "label": m.label,
        "spread": m.extra.get("spread"),
    }


@task(name="render-intune-section")
def render_intune_section(
    name: str,
    ing: dict[str, Any],
    data: dict[str, Any],
    profile: dict[str, Any],
    tuned: list[dict[str, Any]],
    verified: list[dict[str, Any]],
    profile_cached: bool,
    run_dir: str,
) -> dict[str, Any]:
    """The throughput plot, the optimizer comparison table artifact and the markdown."""
    from tasks.plots import throughput_png

    out = Path(run_dir)
    live = {v["optimizer"]: v for v in verified}
    base = next((live[b]["rows_per_s"] for b in ing["baselines"] if b == "autotune" and b in live), None)
    rows = []
    for t in tuned:
        v = live.get(t["optimizer"], {})
        rows.append(
            {
                "optimizer": t["optimizer"],
                "tuning_rows_per_s": t.get("rows_per_s"),
                "tuning_label": t.get("label"),
                "verified_rows_per_s": v.get("rows_per_s"),
                "vs_autotune": (v.get("rows_per_s") or 0.0) / base if base else None,
                "trials": t.get("trials"),
                "tuning_s": t.get("tuning_s"),
                "peak_rss_mb": v.get("peak_rss_mb"),
                "config": json.dumps(t.get("config"), sort_keys=True),
            }
        )
    plot = throughput_png(rows, out / "intune" / "throughput.png", title="rows/s per optimizer")
    table_artifact(f"{name}-intune-optimizers", rows, "InTune vs baselines: rows/s while tuning and verified live")
    chosen = next(r for r in rows if r["optimizer"] == ing["optimizer"])
    cols = ["optimizer", "verified_rows_per_s", "vs_autotune", "tuning_rows_per_s", "tuning_label", "trials", "tuning_s", "peak_rss_mb"]
    md = f"""
**Tuned:** the CPU split across the DLRM tf.data pipeline's stages (read, parse, transform
parallelism; shuffle and prefetch buffers) on {_node(ing['cpu_budget'])['vcpus']} threads, batch {ing['batch_size']},
data `{data['path']}` ({fmt(data.get('manifest', {}).get('rows'))} rows, {'reused' if data.get('reused') else 'generated now'}).

**Profile:** {'cached (reused)' if profile_cached else 'measured (not cached)'}.

**Chosen configuration ({ing['optimizer']}):** `{chosen['config']}`, verified on the live pipeline at
{fmt(chosen['verified_rows_per_s'])} rows/s (measured){f", {chosen['vs_autotune']:.2f}x tf.data AUTOTUNE" if chosen['vs_autotune'] else ''}.

Each optimizer had {fmt(ing['time_budget_s'])} s; "tuning" figures are what it saw while searching (labelled
simulated or measured); "verified" figures are all measured afresh on the live pipeline
({ing['verify_repeats']} windows of {fmt(ing['verify_window_s'])} s, median).

{md_table(rows, cols)}

![rows/s per optimizer](intune/throughput.png)
"""
    summary = {"chosen": chosen, "optimizers": rows, "data": data["path"]}
    return section("intune", "InTune: ingestion pipeline", md, plots=[plot], summary=summary, profile_cached=profile_cached)
