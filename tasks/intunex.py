"""InTuneX tasks: the cluster profile (cached), the plan with its baselines, and the report section.
Thin wrappers over ``ingestion.cluster`` and ``optimizers.intunex``.

The cluster profile is the node-level table: for every job and every unit (node type, half or
quarter), the configuration the node-level agent chose and AUTOTUNE's, with the rows/s the
cluster model gives them. It is the expensive part and depends only on the jobs' pipelines, the
instance types and this task's code, so it is cached like the other profiles
(``tasks.caching.PROFILE_CACHE_POLICY``); demands, pool size, budget and objective are not in
its key, so re-planning after a demand change reuses it.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

from prefect import get_run_logger, task

from core.atomic import save_figure
from core.json_edge import JsonObject
from optimizers.intunex.request import ClusterRequest
from tasks.caching import PROFILE_CACHE_POLICY
from tasks.report import ReportSection, fmt, md_table, section, table_artifact


def _cluster(jobs_file: str, jobs: JsonObject, instance_types: list[str] | None,
             budget_usd_per_h: float | None = None) -> Any:
    """The cluster model of the jobs file ``jobs`` (as read) over the instance types or patterns."""
    from ingestion.cluster.instances import select
    from ingestion.cluster.jobs import parse_jobs
    from ingestion.cluster.model import from_jobs_file

    spec = parse_jobs(jobs, jobs_file)
    return from_jobs_file(spec, select(instance_types), base_dir=Path(jobs_file).parent,
                          budget_usd_per_h=budget_usd_per_h)


def profile_workload(jobs_file: str, jobs: JsonObject, instance_types: list[str] | None) -> JsonObject:
    """What the cluster profile depends on: the jobs' pipelines (not their demands) and the types."""
    pipelines = {**jobs, "jobs": [{k: v for k, v in j.items() if k != "demand_rows_per_s"} | {"demand_rows_per_s": 1.0}
                                  for j in jobs["jobs"]], "budget_usd_per_h": None}
    return {"jobs_file": jobs_file, "jobs": pipelines, "instance_types": instance_types}


@task(name="cluster-profile", cache_policy=PROFILE_CACHE_POLICY, result_serializer="json", persist_result=True)
def cluster_profile(workload: JsonObject) -> JsonObject:
    """The node-level agent's and AUTOTUNE's choice for every job on every unit (cluster model)."""
    from optimizers.intunex.node_agent import NodeTable

    started = time.monotonic()
    table = NodeTable(_cluster(workload["jobs_file"], workload["jobs"], workload["instance_types"])).fill()
    seconds = round(time.monotonic() - started, 2)
    get_run_logger().info("cluster profile: %d node choices in %s s (simulated)", len(table._memo), seconds)  # noqa: SLF001
    return {"choices": table.to_json(), "profile_s": seconds, "label": "simulated"}


@task(name="plan-cluster")
def plan_cluster(request: ClusterRequest, jobs: JsonObject, instance_types: list[str] | None,
                 profile: JsonObject) -> JsonObject:
    """InTuneX's plan and the baselines', on the cluster model with the cached node-level table:
    ``jobs`` is the request's jobs file as read (its measured demands filled in), planned over
    ``instance_types`` (the request's, else the file's: :meth:`ClusterRequest.type_patterns`)."""
    from optimizers.intunex.node_agent import NodeTable
    from optimizers.intunex.run import plan_result

    jobs_file = str(request.jobs_file())
    cluster = _cluster(jobs_file, jobs, instance_types, request.budget_usd_per_h)
    nodes = NodeTable(cluster).load_json(profile["choices"])
    result = plan_result(cluster, nodes, objective=request.objective, baselines=request.baselines_for(live=False),
                         static_type=request.static_type, seed=request.seed)
    result.update(profile_s=profile.get("profile_s"), jobs_file=jobs_file)
    get_run_logger().info("InTuneX: %s rows per $ at $%s/h, all fed: %s (simulated)",
                          fmt(result["throughput_per_usd"]), fmt(result["usd_per_h"]), result["all_fed"])
    return result


def throughput_per_usd_png(rows: list[JsonObject], path: Path) -> Path:
    """Bars of rows delivered per dollar, InTuneX and each baseline (simulated)."""
    from tasks.plots import _pyplot

    plt = _pyplot()
    fig, ax = plt.subplots(figsize=(max(5.0, 1.2 * len(rows) + 2), 4), dpi=110)
    colors = ["tab:blue" if r["planner"] == "intunex" else "0.6" for r in rows]
    ax.bar([r["planner"] for r in rows], [r["throughput_per_usd"] for r in rows], color=colors)
    for i, r in enumerate(rows):
        ax.annotate(f"{r['throughput_per_usd']:.3g}" + ("" if r["all_fed"] else "\n(unfed)"),
                    (i, r["throughput_per_usd"]), ha="center", va="bottom", fontsize=7)
    ax.set_ylabel("rows delivered per dollar (simulated)")
    ax.set_title("InTuneX vs baselines: throughput per dollar")
    ax.grid(axis="y", alpha=0.3)
    fig.tight_layout()
    save_figure(fig, path)
    plt.close(fig)
    return path


@task(name="render-intunex-section")
def render_intunex_section(name: str, result: JsonObject, profile_cached: bool, run_dir: str) -> ReportSection:
    """The plot, the comparison table artifact and the markdown of the plan."""
    rows = [{"planner": "intunex", **{k: result[k] for k in ("throughput_per_usd", "usd_per_h", "all_fed", "nodes", "oom")}}]
    rows += [{"planner": n, **{k: b[k] for k in ("throughput_per_usd", "usd_per_h", "all_fed", "nodes", "oom")}}
             for n, b in result["baselines"].items()]
    for r in rows:
        r["intunex_vs"] = result["throughput_per_usd"] / r["throughput_per_usd"] if r["throughput_per_usd"] else None
    plot = throughput_per_usd_png(rows, Path(run_dir) / "intunex" / "throughput_per_usd.png")
    table_artifact(f"{name}-intunex-planners", rows, "InTuneX vs baselines on the cluster model (simulated)")
    per_job = [{"job": j, "nodes": len(a["nodes"]),
                "types": ", ".join(sorted({n["instance_type"] + ("" if n["share"] == 1 else f":{n['share']:g}") for n in a["nodes"]})),
                "supply_rows_per_s": result["jobs"][j]["supply_rows_per_s"],
                "demand_rows_per_s": result["jobs"][j]["demand_rows_per_s"], "fed": result["jobs"][j]["fed"]}
               for j, a in result["assignment"].items()]
    md = f"""
**Plan ({result['label']}, objective {result['objective']}):** {fmt(result['throughput_per_usd'])} rows per dollar at
${fmt(result['usd_per_h'])}/h on {result['nodes']} nodes ({result['nodes_by_type']}); every job fed: {fmt(result['all_fed'])};
planned in {fmt(result['tuning_s'])} s (the cluster profile {'was cached' if profile_cached else f"took {fmt(result.get('profile_s'))} s"}).

{md_table(per_job)}

{md_table(rows, ['planner', 'throughput_per_usd', 'intunex_vs', 'usd_per_h', 'all_fed', 'nodes', 'oom'])}

![throughput per dollar](intunex/throughput_per_usd.png)

Prices: instance table {result['instance_table']['version']} ({result['instance_table']['region']}, on-demand).
"""
    summary = {k: result[k] for k in ("label", "all_fed", "throughput_per_usd", "usd_per_h", "tuning_s")}
    return section("intunex", "InTuneX: multi-node ingestion plan", md, plots=[plot], summary=summary,
                   profile_cached=profile_cached)
