"""The main flow: Seraph and InTune for one workload file (``trainwise run``)."""

from __future__ import annotations

from typing import Any

from prefect import flow, get_run_logger, task

from flows.intune import intune
from flows.seraph import seraph
from tasks.branches import branches_in_parallel
from tasks.report import render_report
from core.paths import new_run_dir
from optimizers.spec import load_spec


_BRANCH_FLOWS = {"seraph": seraph, "intune": intune}


@task(name="run-branch")
def run_branch(flow_name: str, config: str, run_dir: str, refresh_profiles: bool) -> dict[str, Any]:
    """Run one branch flow (as a subflow of this task) so two can run concurrently."""
    return _BRANCH_FLOWS[flow_name](config=config, run_dir=run_dir, refresh_profiles=refresh_profiles)


@flow(name="optimize", log_prints=True)
def optimize(config: str = "configs/demo.yaml", refresh_profiles: bool = False) -> dict[str, Any]:
    """Tune the RL job (Seraph) and the ingestion pipeline (InTune) the workload file
    names, concurrently where the machine allows, and write one report."""
    spec = load_spec(config)  # a bad file fails here, before any task runs
    run_dir = new_run_dir("optimize")
    logger = get_run_logger()
    logger.info("results folder: %s", run_dir)

    branches = [name for name, part in (("seraph", spec.rl), ("intune", spec.ingestion)) if part is not None]
    parallel, why = branches_in_parallel(spec.concurrency, len(branches))
    logger.info("branches %s: %s", branches, why)
    if parallel:
        futures = [run_branch.submit(b, config, str(run_dir), refresh_profiles) for b in branches]
        results = [f.result() for f in futures]
    else:
        results = [_BRANCH_FLOWS[b](config=config, run_dir=str(run_dir), refresh_profiles=refresh_profiles) for b in branches]

    return render_report(
        spec.name,
        f"trainwise optimize: {spec.name}",
        str(run_dir),
        [r["section"] for r in results],
        config=config,
        extra={"flow": "optimize", "branches": branches, "parallel": parallel, "concurrency_reason": why},
    )
