"""One InTuneX planning run as the CLI and the flow use it: jobs file in, result dict out.

The result dict is what ``--json-out`` writes: ``label`` (simulated), ``all_fed``,
``throughput_per_usd`` (rows per dollar), ``usd_per_h``, ``assignment`` (per job: its nodes with
``instance_type``, ``share``, ``config``), ``baselines`` (per name, the same figures), ``tuning_s``
(InTuneX's planning time: both agents, not the baselines), the instance table's version with
its family speeds, ``bound`` and ``gap_to_bound`` (the exact MILP on the planner's own table,
:func:`optimizers.intunex.planner.bound_report`), and ``speed_band_robust``: whether the plan holds with every family's vCPU
speed at the low and at the high end of its band (re-planned there, with the alternatives).
"""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import NotRequired, TypedDict

from ingestion.cluster.instances import InstanceType, TableInfo, band_speeds, table_info
from ingestion.cluster.jobs import JobsFile
from ingestion.cluster.model import ClusterModel, from_jobs_file
from optimizers.intunex.baselines import BASELINES, run_baselines
from optimizers.intunex.bound import BoundJson
from optimizers.intunex.node_agent import NodeTable
from optimizers.intunex.planner import (JobNodes, PlanJson, PlanSummary, SpeedBandCheck, bound_report, plan_intunex,
                                        speed_band_check)
from optimizers.intunex.policies import cluster_policy
from optimizers.intunex.whatif import BudgetRow


class IngestPool(TypedDict):
    instance_type: str
    count: int


class TfVars(TypedDict):
    """Terraform's variables for the plan's ingestion nodes (``infra/terraform/envs/dev``)."""

    ingest_pools: list[IngestPool]


class PlanResult(PlanJson):
    """What ``ingest cluster`` (and the InTuneX flow) writes: see the module's docstring."""

    bound: BoundJson
    gap_to_bound: float | None
    speed_band_robust: SpeedBandCheck | None  # None when the bands are not re-planned (a what-if)
    tuning_s: float
    objective: str
    budget_usd_per_h: float | None
    max_nodes: int
    instance_types: list[str]
    instance_table: TableInfo
    service_overheads: dict[str, float | str]  # ServiceOverheads' fields
    baselines: dict[str, PlanSummary]
    baseline_assignments: dict[str, dict[str, JobNodes]]
    budget_front: NotRequired[list[BudgetRow]]  # a what-if's
    plot: NotRequired[str]
    what_if: NotRequired[str]  # the CLI's --what-if
    tfvars: NotRequired[TfVars]  # the CLI's --write-tfvars


def plan_result(cluster: ClusterModel, nodes: NodeTable, *, objective: str = "throughput-per-usd",
                baselines: tuple[str, ...] = BASELINES, static_type: str | None = None, seed: int = 0,
                bands: bool = True) -> PlanResult:
    started = time.monotonic()
    plan = plan_intunex(cluster, nodes, cluster_policy(), objective=objective, seed=seed)
    tuning_s = time.monotonic() - started
    bound = bound_report(cluster, nodes, plan, objective)
    others = run_baselines(cluster, nodes, baselines, static_type)
    ends = {end: band_speeds(end) for end in ("low", "high")}
    return {
        **plan.to_json(),
        **bound,
        "speed_band_robust": speed_band_check(cluster, nodes, cluster_policy(), plan, ends, seed=seed) if bands else None,
        "tuning_s": round(tuning_s, 2),
        "objective": objective,
        "budget_usd_per_h": cluster.budget_usd_per_h,
        "max_nodes": cluster.max_nodes,
        "instance_types": [t.name for t in cluster.types],
        "instance_table": table_info(),
        "service_overheads": dict(cluster.overheads.__dict__),
        "baselines": {name: p.summary() for name, p in others.items()},
        "baseline_assignments": {name: p.to_json()["assignment"] for name, p in others.items()},
    }


def plan_cluster(spec: JobsFile, types: list[InstanceType], *, objective: str = "throughput-per-usd",
                 budget_usd_per_h: float | None = None, baselines: tuple[str, ...] = BASELINES,
                 static_type: str | None = None, seed: int = 0, base_dir: Path | None = None) -> PlanResult:
    cluster = from_jobs_file(spec, types, base_dir=base_dir, budget_usd_per_h=budget_usd_per_h)
    return plan_result(cluster, NodeTable(cluster), objective=objective, baselines=baselines,
                       static_type=static_type, seed=seed)


def what_if(spec: JobsFile, types: list[InstanceType], plot: Path, *, baselines: tuple[str, ...] = BASELINES,
            static_type: str | None = None, seed: int = 0, title: str = "what-if",
            base_dir: Path | None = None) -> PlanResult:
    """Plan a cluster that does not exist yet (simulated): the plan with every baseline and the exact
    bound, then the most rows InTuneX and the bound deliver at budgets around the plan's cost,
    drawn as throughput per dollar against budget (``plot``, a PNG). The speed bands are not re-planned."""
    from optimizers.intunex.whatif import budget_sweep
    from optimizers.intunex.whatif_plot import render_budget_png

    cluster = from_jobs_file(spec, types, base_dir=base_dir)
    nodes = NodeTable(cluster)
    result = plan_result(cluster, nodes, baselines=baselines, static_type=static_type, seed=seed, bands=False)
    points = budget_sweep(cluster, nodes, cluster_policy(), result["usd_per_h"], seed=seed) if result["usd_per_h"] else []
    result["budget_front"] = [p.to_json() for p in points]
    result["plot"] = str(render_budget_png(points, result["baselines"], result, plot,
                                           f"{title}: {len(cluster.jobs)} jobs, at most {cluster.max_nodes} nodes, "
                                           f"{len(cluster.types)} types (simulated)"))
    return result


def tfvars_of(result: PlanResult) -> TfVars:
    """Terraform variables for ``infra/terraform/envs/dev``: one ingestion pool per instance type
    (``ingest_pools``, which replaces ``ingest_instance_type`` x ``ingest_count``)."""
    nodes = result["nodes_by_type"]
    return {"ingest_pools": [{"instance_type": t, "count": int(n)} for t, n in sorted(nodes.items())]}


def write_tfvars(path: Path, variables: TfVars) -> Path:
    """``.json`` files get JSON (``*.tfvars.json``); anything else HCL (``*.tfvars``)."""
    from core.atomic import write_text

    if path.suffix == ".json":
        return write_text(path, json.dumps(variables, indent=2) + "\n")
    lines = ["# Written by `trainwise ingest cluster --write-tfvars`: the plan's ingestion nodes."]
    for key, value in variables.items():
        if isinstance(value, list):
            items = ",\n".join(f'  {{ instance_type = "{p["instance_type"]}", count = {p["count"]} }}' for p in value)
            lines.append(f"{key} = [\n{items}\n]" if value else f"{key} = []")
        elif isinstance(value, str):
            lines.append(f'{key} = "{value}"')
        else:
            lines.append(f"{key} = {value}")
    return write_text(path, "\n".join(lines) + "\n")
