"""InTuneX: profile the cluster (cached) -> plan nodes and per-node configurations -> report."""

from __future__ import annotations

from pathlib import Path

import yaml
from prefect import flow, get_run_logger

from core.paths import new_run_dir
from optimizers.intunex.request import ClusterRequest
from tasks.caching import call_cached
from tasks.intunex import cluster_profile, plan_cluster, profile_workload, render_intunex_section
from tasks.report import RunResult, render_report


@flow(name="intunex", log_prints=True)
def intunex(request: ClusterRequest = ClusterRequest(), refresh_profiles: bool = False,
            profile_ttl_hours: float = 168.0) -> RunResult:
    """Plan a multi-node ingestion pool for the request's jobs file on the cluster model and
    report it against the baselines (simulated figures, labelled so).

    Args:
        request: what to plan: the jobs file (relative to the working directory), the instance
            types, the objective, the budget, the baselines and the seed; the same request
            ``trainwise ingest cluster``'s flags make.
        refresh_profiles: measure the cluster profile afresh even if a cached one is valid.
        profile_ttl_hours: how long a cached cluster profile is reused.
    """
    spec = request.load_jobs()  # a bad file fails here, before any task runs
    jobs = str(request.jobs_file())
    raw = yaml.safe_load(Path(jobs).read_text())
    if any(j.demand_rows_per_s == "measure" for j in spec.jobs):  # the trainers' demands, measured once here
        from ingestion.cluster.trainer import resolve_demands

        spec, _ = resolve_demands(spec)
        raw["jobs"] = [{**r, "demand_rows_per_s": j.demand_rows_per_s} for r, j in zip(raw["jobs"], spec.jobs)]
    types = request.type_patterns(spec)
    out = new_run_dir("intunex")
    get_run_logger().info("intunex: %d jobs, pool of %d nodes, objective %s", len(spec.jobs), spec.pool.max_nodes,
                          request.objective)
    profile, cached = call_cached(cluster_profile, what="InTuneX cluster", ttl_hours=profile_ttl_hours,
                                  refresh=refresh_profiles, workload=profile_workload(jobs, raw, types))
    result = plan_cluster(request, raw, types, profile)
    section = render_intunex_section(Path(jobs).stem, result, cached, str(out))
    return render_report(Path(jobs).stem, f"trainwise intunex: {Path(jobs).name}", str(out), [section], config=jobs,
                         extra={"flow": "intunex", "plan": {k: v for k, v in result.items() if k != "baseline_assignments"}})
