"""The main flow: Seraph and InTune for one workload file (``trainwise run``)."""

from __future__ import annotations

from prefect import flow, get_run_logger, task
from prefect.states import Failed, State

from flows.intune import intune
from flows.seraph import seraph
from tasks.branches import branches_in_parallel
from tasks.report import BranchResult, ReportSection, RunResult, render_report, section
from core.paths import new_run_dir
from flows.params import workload_spec
from optimizers.spec import WorkloadSpec


_BRANCH_FLOWS = {"seraph": seraph, "intune": intune}


@task(name="run-branch")
def run_branch(flow_name: str, config: str, workload: WorkloadSpec | None, run_dir: str,
               refresh_profiles: bool) -> RunResult | BranchResult:
    """Run one branch flow (as a subflow of this task) so two can run concurrently."""
    return _BRANCH_FLOWS[flow_name](config=config, workload=workload, run_dir=run_dir, refresh_profiles=refresh_profiles)


@flow(name="optimize", log_prints=True)
def optimize(config: str = "configs/demo.yaml", workload: WorkloadSpec | None = None,
             refresh_profiles: bool = False) -> RunResult | State:
    """Tune the RL job (Seraph) and the ingestion pipeline (InTune) the workload names
    (``workload`` if given, else the ``config`` file), concurrently where the machine
    allows, and write one report.

    Args:
        config: a workload YAML file, relative to the working directory (the project root,
            or the checkout a work pool's worker enters); used when ``workload`` is empty.
        workload: the workload itself, typed (what a workload file holds); wins over ``config``.
        refresh_profiles: measure the profiles afresh even if a cached one is still valid.
    """
    spec, source = workload_spec(config, workload)  # a bad workload fails here, before any task runs
    run_dir = new_run_dir("optimize")
    logger = get_run_logger()
    logger.info("results folder: %s", run_dir)

    branches = [name for name, part in (("seraph", spec.rl), ("intune", spec.ingestion)) if part is not None]
    parallel, why = branches_in_parallel(spec.concurrency, len(branches))
    logger.info("branches %s: %s", branches, why)
    if parallel:
        futures = [run_branch.submit(b, config, workload, str(run_dir), refresh_profiles) for b in branches]
        for f in futures:
            f.wait()
        states = [f.state for f in futures]
    else:
        states = [_BRANCH_FLOWS[b](config=config, workload=workload, run_dir=str(run_dir),
                                   refresh_profiles=refresh_profiles, return_state=True) for b in branches]

    sections, failed = [], {}
    for name, state in zip(branches, states):
        outcome = _branch_outcome(state)
        if isinstance(outcome, str):
            logger.error("the %s branch failed: %s", name, outcome)
            failed[name] = outcome
            sections.append(_failed_section(name, outcome))
        else:
            sections.append(outcome["section"])
    result = render_report(
        spec.name,
        f"trainwise optimize: {spec.name}",
        str(run_dir),
        sections,
        config=source,
        extra={"flow": "optimize", "branches": branches, "parallel": parallel, "concurrency_reason": why,
               "failed_branches": failed},
    )
    if failed:  # the other branches' results are in the report; the run itself failed, and says why
        reasons = "; ".join(f"{name}: {reason}" for name, reason in failed.items())
        return Failed(message=f"branch(es) failed ({reasons}); the report of the rest is {result['report']}",
                      data=result)
    return result


def _branch_outcome(state: State) -> BranchResult | str:
    """A branch's result, or why it failed (the exception's type and message, one line)."""
    if state.is_completed():
        return state.result()
    try:
        state.result(raise_on_failure=True)
    except BaseException as exc:  # noqa: BLE001 - reported, not handled
        return " ".join(f"{type(exc).__name__}: {exc}".split())[:500]
    return f"ended in state {state.type.value}: {state.message}"


def _failed_section(name: str, reason: str) -> ReportSection:
    return section(name, f"{name}: failed", f"The {name} branch failed: {reason}\n\nThe other branches ran to the end; "
                   "their sections are complete.", summary={"failed": reason})
