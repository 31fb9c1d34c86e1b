"""InTune: locate or generate data -> calibrate (cached) -> tune -> verify live -> report.

Each stage is one task run once per optimizer at most, and each uses what the one before
returned: the tune tasks take the calibration task's profile (no optimizer calibrates
again), the verify task measures exactly the configurations the tune tasks chose."""

from __future__ import annotations

from pathlib import Path

from prefect import flow, get_run_logger

from tasks.caching import call_cached
from tasks.ingest import (
    locate_or_generate_data,
    measure_configurations,
    pipeline_workload_of,
    profile_pipeline,
    render_intune_section,
    tune_ingestion,
)
from tasks.report import BranchResult, RunResult, render_report
from tasks.timeouts import tune_timeout_s, verify_timeout_s
from core.paths import new_run_dir
from flows.params import workload_spec
from optimizers.spec import WorkloadSpec


@flow(name="intune", log_prints=True)
def intune(config: str = "configs/demo.yaml", workload: WorkloadSpec | None = None, run_dir: str | None = None,
           refresh_profiles: bool = False) -> RunResult | BranchResult:
    """Tune the workload's ingestion pipeline (``workload`` if given, else the ``config``
    file) with InTune and its baselines and verify every chosen configuration on the live
    pipeline. Writes its own report when run alone; as a branch of ``optimize`` it returns
    its report section.

    Args:
        config: a workload YAML file with an ``ingestion:`` section, relative to the working
            directory (the project root, or the checkout a work pool's worker enters); used
            when ``workload`` is empty.
        workload: the workload itself, typed; this flow runs its ``ingestion`` section. Wins over
            ``config``.
        run_dir: the results folder; ``optimize`` sets it when this flow runs as its branch.
        refresh_profiles: measure the pipeline profile afresh even if a cached one is still valid.
    """
    spec, source = workload_spec(config, workload, need="ingestion")  # a bad workload fails here, before any task runs
    ing = spec.ingestion
    assert ing is not None
    out = Path(run_dir) if run_dir else new_run_dir("intune")
    get_run_logger().info("intune: optimizer %s vs %s, %s s each", ing.optimizer, ing.baselines, ing.time_budget_s)

    data = locate_or_generate_data(ing.data, ing.format)
    profile, cached = call_cached(
        profile_pipeline,
        what="InTune pipeline",
        ttl_hours=spec.cache.profile_ttl_hours,
        refresh=refresh_profiles,
        workload=pipeline_workload_of(ing, data),
    )
    optimizers = [ing.optimizer, *[b for b in ing.baselines if b != ing.optimizer]]
    tune = tune_ingestion.with_options(timeout_seconds=tune_timeout_s(ing.time_budget_s))  # tasks/timeouts.py
    tuned = [
        tune(
            name, data, profile, ing,
            progress_key=f"{spec.name}-intune-progress", position=(i, len(optimizers)), required=(name == ing.optimizer),
        )
        for i, name in enumerate(optimizers)
    ]
    verified = measure_configurations.with_options(timeout_seconds=verify_timeout_s(len(tuned), ing))(data, tuned, ing)
    section = render_intune_section(spec.name, ing, data, tuned, verified, cached, str(out))

    if run_dir is not None:  # a branch of optimize: hand the section up
        return {"section": section, "run_dir": str(out)}
    return render_report(spec.name, f"trainwise intune: {spec.name}", str(out), [section], config=source, extra={"flow": "intune"})
