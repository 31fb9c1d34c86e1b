"""Baselines for InTuneX, on the same cluster model.

* ``static``: N whole nodes of one instance type for every job, tf.data AUTOTUNE inside each (its
  modelled configuration), N the smallest count that feeds the most demanding job (one hand-made
  worker-pool template for every job), at most the pool's nodes over the jobs.
* ``cachew``: Cachew-style autoscaling (Graur et al., USENIX ATC '22) of tf.data service workers of
  the static type, AUTOTUNE inside: each job starts with one worker and gains one while its client
  stalls (delivered rows below its demand), while the pool has nodes.
* ``intune-fixed``: InTune per node with the static type and count (the node-level agent's
  configurations, no cluster-level choice).
* ``greedy``: per job on its own, whole nodes only, add the type with the most useful rows per
  dollar until the job is fed (node-level agent's configurations; no sharing of nodes between jobs).
* ``oracle``: the exact assignment (a mixed-integer program, HiGHS via ``scipy.optimize.milp``)
  over every unit, with each unit's configuration from the exhaustive grid on the cluster model.
"""

from __future__ import annotations

import math
import time

import numpy as np

from ingestion.cluster.instances import InstanceType
from ingestion.cluster.model import ClusterModel, NodeSlot, Unit
from optimizers.intunex.names import BASELINES
from optimizers.intunex.node_agent import NodeTable
from optimizers.intunex.planner import Plan, PlanInfo, assignment_of, planning_table

#: The type a team picks by hand for CPU-bound ingestion: a mid-size compute-optimised x86 node.
STATIC_TYPE = "c7i.4xlarge"


def static_type(cluster: ClusterModel, name: str | None = None) -> InstanceType:
    """``name`` if given and in the pool's types, else ``STATIC_TYPE``, else the type nearest 16 vCPUs."""
    for wanted in (name, STATIC_TYPE):
        for t in cluster.types:
            if t.name == wanted:
                return t
    return min(cluster.types, key=lambda t: (abs(t.vcpus - 16), t.usd_per_hour))


def _fixed_nodes(cluster: ClusterModel, nodes: NodeTable, unit: Unit, counts: dict[str, int], method: str,
                 name: str, info: PlanInfo) -> Plan:
    assignment = {}
    for job in cluster.jobs:
        choice = nodes.choice(job, unit, method)
        assignment[job.name] = [NodeSlot(unit, dict(choice.config))] * counts[job.name] if choice else []
    return Plan(name, assignment, cluster.evaluate(assignment), info)


def static_counts(cluster: ClusterModel, nodes: NodeTable, unit: Unit) -> dict[str, int]:
    cap = max(1, cluster.max_nodes // len(cluster.jobs))
    needed = [math.ceil(j.demand_rows_per_s / r) if (r := nodes.rows(j, unit, "autotune")) > 0 else cap
              for j in cluster.jobs]
    n = min(cap, max(needed))
    return {j.name: n for j in cluster.jobs}


def static(cluster: ClusterModel, nodes: NodeTable, type_name: str | None = None) -> Plan:
    return _one_type_per_job(cluster, nodes, type_name, "autotune", "static", "model of tf.data AUTOTUNE")


def intune_fixed(cluster: ClusterModel, nodes: NodeTable, type_name: str | None = None) -> Plan:
    return _one_type_per_job(cluster, nodes, type_name, "intunex", "intune-fixed", "InTune node-level agent")


def _one_type_per_job(cluster: ClusterModel, nodes: NodeTable, type_name: str | None, source: str, label: str,
                      node_config: str) -> Plan:
    """Static provisioning's node count and type for every job, each node configured by ``source``."""
    unit = Unit(static_type(cluster, type_name))
    counts = static_counts(cluster, nodes, unit)
    return _fixed_nodes(cluster, nodes, unit, counts, source, label,
                        {"instance_type": unit.itype.name, "nodes_per_job": next(iter(counts.values())),
                         "node_config": node_config})


def cachew(cluster: ClusterModel, nodes: NodeTable, type_name: str | None = None) -> Plan:
    unit = Unit(static_type(cluster, type_name))
    counts = {j.name: 1 for j in cluster.jobs}
    rows = {j.name: nodes.rows(j, unit, "autotune") for j in cluster.jobs}
    steps = 0
    while sum(counts.values()) < cluster.max_nodes:
        stalled = [j for j in cluster.jobs if counts[j.name] * rows[j.name] < j.demand_rows_per_s and rows[j.name] > 0]
        if not stalled:
            break
        # the job stalling most (largest share of its demand unmet) gets the next worker
        worst = max(stalled, key=lambda j: 1 - counts[j.name] * rows[j.name] / j.demand_rows_per_s)
        counts[worst.name] += 1
        steps += 1
    return _fixed_nodes(cluster, nodes, unit, counts, "autotune", "cachew",
                        {"instance_type": unit.itype.name, "scale_ups": steps, "workers": counts,
                         "node_config": "model of tf.data AUTOTUNE"})


def greedy(cluster: ClusterModel, nodes: NodeTable) -> Plan:
    whole = [Unit(t) for t in cluster.types]
    assignment: dict[str, list[NodeSlot]] = {}
    used = 0
    for job in cluster.jobs:
        slots, supply = [], 0.0
        rows = [nodes.rows(job, u) for u in whole]
        while supply < job.demand_rows_per_s * (1 - 1e-9) and used < cluster.max_nodes:
            deficit = job.demand_rows_per_s - supply
            value = [min(r, deficit) / u.usd_per_hour if r > 0 else -1 for r, u in zip(rows, whole)]
            best = int(np.argmax(value))
            if value[best] <= 0:
                break
            choice = nodes.choice(job, whole[best])
            assert choice is not None
            slots.append(NodeSlot(whole[best], dict(choice.config)))
            supply += rows[best]
            used += 1
        assignment[job.name] = slots
    return Plan("greedy", assignment, cluster.evaluate(assignment), {"node_config": "InTune node-level agent"})


def oracle(cluster: ClusterModel, nodes: NodeTable, time_limit_s: float = 60.0) -> Plan | None:
    """The least-cost assignment that feeds every job (exact MILP, :func:`optimizers.intunex.bound.solve_bound`),
    per-unit configurations from the exhaustive grid; None when no assignment feeds every job within
    the pool and budget."""
    from optimizers.intunex.bound import solve_bound

    started = time.monotonic()
    table = planning_table(cluster, nodes, "exhaustive", "least-cost")
    found = solve_bound(table.problem, time_limit_s)
    if found.counts is None:
        return None
    assignment = assignment_of(cluster, nodes, table, found.counts)
    info: PlanInfo = {"solver": "HiGHS MILP (scipy.optimize.milp)", "status": found.status,
                      "proven_optimal": found.proven_optimal, "node_config": "exhaustive grid on the cluster model",
                      "oracle_s": round(time.monotonic() - started, 2)}
    return Plan("oracle", assignment, cluster.evaluate(assignment), info)


def run_baselines(cluster: ClusterModel, nodes: NodeTable, names: tuple[str, ...] = BASELINES,
                  static_type_name: str | None = None, oracle_time_limit_s: float = 60.0) -> dict[str, Plan]:
    out: dict[str, Plan] = {}
    for name in names:
        if name == "static":
            out[name] = static(cluster, nodes, static_type_name)
        elif name == "cachew":
            out[name] = cachew(cluster, nodes, static_type_name)
        elif name == "intune-fixed":
            out[name] = intune_fixed(cluster, nodes, static_type_name)
        elif name == "greedy":
            out[name] = greedy(cluster, nodes)
        elif name == "oracle":
            plan = oracle(cluster, nodes, oracle_time_limit_s)
            if plan is not None:
                out[name] = plan
    return out
