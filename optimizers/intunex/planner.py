"""InTuneX: plan a pool of nodes for several ingestion jobs with the two agents, and re-plan.

1. **Node level**: for every job and every unit (a node type, or a half or a quarter of one) the
   shared node-level agent picks the pipeline's configuration on that unit
   (:mod:`optimizers.intunex.node_agent`); the cluster model turns it into rows/s delivered
   (service overheads, network).
2. **Cluster level**: the cluster agent assigns units to jobs on that table
   (:mod:`optimizers.intunex.cluster_agent`), fine-tuned on this problem first.
3. **Re-plan**: when demand changes (a job starts, ends, or its accelerators change),
   :func:`replan` starts the cluster agent from the current assignment, keeps what still serves,
   adds what an unfed job needs, and lets the local moves drop or swap what is no longer needed.

Objectives (``OBJECTIVES``): ``throughput-per-usd`` (default; rows delivered per dollar with every
job fed: each job consumes its demand, so this is the cheapest plan that feeds all, and when the
pool or budget cannot feed all it keeps the best it can and says ``all_fed: false``);
``least-cost`` (the same plan, but a pool that cannot feed every job is an error);
``max-throughput`` (the most rows delivered within ``--budget-usd-per-h``).
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any, TypedDict

import numpy as np

from core.errors import UserError
from ingestion.cluster.model import ClusterModel, ClusterResult, ClusterSummary, NodeSlot, Unit
from optimizers.intunex.bound import BoundJson
from optimizers.intunex.cluster_agent import LinearPolicy, Problem, State, TrainingReport, plan as agent_plan
from optimizers.intunex.names import OBJECTIVES
from optimizers.intunex.node_agent import NodeTable


class ReplanInfo(TypedDict):
    units_before: dict[str, int]
    units_after: dict[str, int]
    units_kept_at_most: int


class PlanInfo(TypedDict, total=False):
    """How a plan was found: InTuneX's agents (the cluster agent's own report, the node level's time,
    a re-plan or a re-fit), or a baseline's method (its instance type, solver, node configuration)."""

    finetune: TrainingReport | dict[str, float]  # the cluster agent's (cluster_agent.AgentPlanInfo)
    episodes_decoded: int
    score_before_moves: float
    score: float
    weights: list[float]
    plan_s: float
    node_level_s: float
    objective: str
    policy: str | None  # the cluster policy's source
    units: int
    replan: ReplanInfo
    refit: dict[str, float]  # per measured job, the factor its pipeline's level was scaled by
    instance_type: str  # the baselines': static, intune-fixed, cachew
    nodes_per_job: int
    scale_ups: int
    workers: dict[str, int]
    node_config: str
    solver: str  # the oracle's
    status: str
    proven_optimal: bool
    oracle_s: float
    live_config: str  # the live loop's note on each unit's configuration


class SlotJson(TypedDict):
    instance_type: str
    share: float
    vcpus: int
    usd_per_h: float
    config: dict[str, int]


class JobNodes(TypedDict):
    nodes: list[SlotJson]


class PlanSummary(ClusterSummary):
    """A plan as result files carry it without its assignment (the baselines' rows)."""

    info: PlanInfo


class PlanJson(ClusterSummary):
    """A plan as result files carry it: what it delivers, its assignment, how it was found."""

    assignment: dict[str, JobNodes]
    info: PlanInfo


class BoundReport(TypedDict):
    bound: BoundJson
    gap_to_bound: float | None


class BandEnd(TypedDict):
    speeds: dict[str, float]
    plan_all_fed: bool
    plan_usd_per_h: float
    alternative_usd_per_h: float
    alternative_all_fed: bool
    alternative_nodes_by_type: dict[str, int]
    holds: bool
    same_types: bool


class SpeedBandCheck(TypedDict):
    tolerance: float
    ends: dict[str, BandEnd]
    robust: bool
    types_robust: bool


@dataclass
class Plan:
    """An assignment of units to jobs, what the cluster model says it delivers, and how it was found."""

    name: str
    assignment: dict[str, list[NodeSlot]]
    result: ClusterResult
    info: PlanInfo = field(default_factory=lambda: PlanInfo())

    def to_json(self) -> PlanJson:
        return {**self.result.summary(),
                "assignment": {job: {"nodes": [slot_json(s) for s in slots]} for job, slots in self.assignment.items()},
                "info": self.info}

    def summary(self) -> PlanSummary:
        return {**self.result.summary(), "info": self.info}


def slot_json(slot: NodeSlot) -> SlotJson:
    return {"instance_type": slot.unit.itype.name, "share": slot.unit.fraction, "vcpus": slot.unit.vcpus,
            "usd_per_h": slot.unit.usd_per_hour, "config": dict(slot.config)}


@dataclass
class Table:
    """The planning table of one method: units, rows per job and unit, and the problem over it."""

    units: list[Unit]
    problem: Problem
    method: str


def planning_table(cluster: ClusterModel, nodes: NodeTable, method: str, objective: str,
                   units: list[Unit] | None = None) -> Table:
    units = units if units is not None else cluster.units()
    names = sorted({u.itype.name for u in units})
    price = {t.name: t.usd_per_hour for t in cluster.types}
    nodes.fill_units(units, method)
    rows = np.array([[nodes.rows(job, u, method) for u in units] for job in cluster.jobs])
    problem = Problem(rows, np.array([j.demand_rows_per_s for j in cluster.jobs]),
                      np.array([names.index(u.itype.name) for u in units]), np.array([u.fraction for u in units]),
                      np.array([price[n] for n in names]), cluster.max_nodes, cluster.budget_usd_per_h, objective,
                      np.array([u.itype.vcpus for u in units], dtype=float))
    return Table(units, problem, method)


def assignment_of(cluster: ClusterModel, nodes: NodeTable, table: Table, counts: np.ndarray) -> dict[str, list[NodeSlot]]:
    out: dict[str, list[NodeSlot]] = {}
    for j, job in enumerate(cluster.jobs):
        slots = []
        for u in np.flatnonzero(counts[j]):
            unit = table.units[u]
            choice = nodes.choice(job, unit, table.method)
            assert choice is not None
            slots += [NodeSlot(unit, dict(choice.config))] * int(counts[j, u])
        out[job.name] = slots
    return out


def counts_of(cluster: ClusterModel, table: Table, assignment: dict[str, list[NodeSlot]]) -> np.ndarray:
    """The count matrix of an assignment over ``table``'s units (jobs not in the table are dropped)."""
    counts = np.zeros(table.problem.rows.shape, dtype=np.int64)
    index = {(u.itype.name, u.fraction): i for i, u in enumerate(table.units)}
    for j, job in enumerate(cluster.jobs):
        for slot in assignment.get(job.name, []):
            i = index.get((slot.unit.itype.name, slot.unit.fraction))
            if i is not None and table.problem.rows[j, i] > 0:
                counts[j, i] += 1
    return counts


def check_objective(cluster: ClusterModel, objective: str) -> None:
    if objective not in OBJECTIVES:
        raise UserError(f"--objective {objective!r}; allowed: {', '.join(OBJECTIVES)}")
    if objective == "max-throughput" and cluster.budget_usd_per_h is None:
        raise UserError("--objective max-throughput needs --budget-usd-per-h (or budget_usd_per_h in the jobs file)")


def plan_intunex(cluster: ClusterModel, nodes: NodeTable, policy: LinearPolicy, *, objective: str = "throughput-per-usd",
                 seed: int = 0, previous: dict[str, list[NodeSlot]] | None = None, time_limit_s: float = 60.0,
                 node_method: str = "intunex") -> Plan:
    """Both agents on the cluster model (see the module docstring); ``previous`` warm-starts a re-plan.
    ``node_method="autotune"`` gives the cluster agent AUTOTUNE's node configurations instead (the
    ablation that shows what the node level adds)."""
    check_objective(cluster, objective)
    started = time.monotonic()
    table = planning_table(cluster, nodes, node_method, objective)
    node_s = time.monotonic() - started
    start = State(table.problem, counts_of(cluster, table, previous)) if previous else None
    state, info = agent_plan(policy, table.problem, seed=seed, start=start, time_limit_s=time_limit_s)
    assignment = assignment_of(cluster, nodes, table, state.counts)
    result = cluster.evaluate(assignment)
    if objective == "least-cost" and not result.all_fed:
        unfed = [j for j, ok in result.fed.items() if not ok]
        raise UserError(f"the pool cannot feed every job (unfed: {', '.join(unfed)}) within {cluster.max_nodes} nodes"
                        + (f" and ${cluster.budget_usd_per_h:g}/h" if cluster.budget_usd_per_h else "")
                        + "; raise pool.max_nodes or the budget, or use --objective throughput-per-usd")
    plan_info: PlanInfo = {**info, "node_level_s": round(node_s, 2), "objective": objective,
                           "policy": policy.info.get("source"), "units": len(table.units)}
    return Plan("intunex" if node_method == "intunex" else f"intunex-{node_method}-nodes", assignment, result, plan_info)


def bound_report(cluster: ClusterModel, nodes: NodeTable, plan: Plan, objective: str = "throughput-per-usd",
                 time_limit_s: float = 60.0) -> BoundReport:
    """The exact bound on the planner's own table (:mod:`optimizers.intunex.bound`) and the plan's
    ``gap_to_bound``: 1 - its throughput per dollar over the bound's (with every job fed), or 1 - its
    delivered rows over the bound's for ``max-throughput``; None when no assignment feeds every job."""
    from optimizers.intunex.bound import solve_bound

    table = planning_table(cluster, nodes, "intunex", objective)
    found = solve_bound(table.problem, time_limit_s)
    if found.metric == "delivered_rows_per_s":
        gap = found.gap(plan.result.delivered)
    else:
        gap = found.gap(plan.result.throughput_per_usd) if plan.result.all_fed else None
    return {"bound": found.to_json(), "gap_to_bound": None if gap is None else round(gap, 6)}


def speed_band_check(cluster: ClusterModel, nodes: NodeTable, policy: LinearPolicy, plan: Plan,
                     bands: dict[str, dict[str, float]], seed: int = 0, tolerance: float = 0.05) -> SpeedBandCheck:
    """Does ``plan`` hold across the family speed bands? Per band end (family -> factor), re-plan
    on the cluster model with those speeds and evaluate ``plan``'s assignment there: it holds when
    it still feeds every job and costs at most ``tolerance`` more than the re-plan. ``robust`` is
    whether it holds at every end; ``types_robust`` whether each end's re-plan picks the same
    instance types (only the counts change); each end gives the re-plan's node types and cost."""
    from dataclasses import replace

    ends: dict[str, BandEnd] = {}
    for end, speeds in bands.items():
        other = replace(cluster, speeds={**cluster.speeds, **speeds})
        table = NodeTable(other, nodes.agent, nodes.processes)
        table._memo = nodes._memo  # noqa: SLF001  the memo is keyed by family speed, so choices carry over
        alternative = plan_intunex(other, table, policy, seed=seed)
        held = other.evaluate(plan.assignment)
        holds = held.all_fed and held.usd_per_h <= alternative.result.usd_per_h * (1 + tolerance) + 1e-9
        ends[end] = {"speeds": speeds, "plan_all_fed": held.all_fed, "plan_usd_per_h": held.usd_per_h,
                            "alternative_usd_per_h": alternative.result.usd_per_h,
                            "alternative_all_fed": alternative.result.all_fed,
                            "alternative_nodes_by_type": alternative.result.nodes, "holds": holds,
                            "same_types": set(alternative.result.nodes) == set(plan.result.nodes)}
    return {"tolerance": tolerance, "ends": ends, "robust": all(e["holds"] for e in ends.values()),
            "types_robust": all(e["same_types"] for e in ends.values())}


def replan(cluster: ClusterModel, nodes: NodeTable, policy: LinearPolicy, previous: Plan, **kwargs: Any) -> Plan:
    """Re-tune after demand changed: start from ``previous``'s assignment (jobs that ended drop out)."""
    new = plan_intunex(cluster, nodes, policy, previous=previous.assignment, **kwargs)
    before = {j: len(s) for j, s in previous.assignment.items()}
    after = {j: len(s) for j, s in new.assignment.items()}
    kept = sum(min(before.get(j, 0), after.get(j, 0)) for j in after)
    new.info["replan"] = {"units_before": before, "units_after": after, "units_kept_at_most": kept}
    return new


def refit_levels(cluster: ClusterModel, plan: Plan, measured: dict[str, float]) -> ClusterModel:
    """The cluster model with each measured job's pipeline re-levelled so that ``plan`` predicts the
    rows/s measured for that job (``ingestion.calibrate.scale_level``: every time cost times one
    factor, knob effects kept). Jobs without a measurement keep their model."""
    from dataclasses import replace

    from ingestion.calibrate import scale_level

    jobs = []
    for job in cluster.jobs:
        predicted, seen = plan.result.supply.get(job.name, 0.0), measured.get(job.name)
        if seen and seen > 0 and predicted > 0:
            job = replace(job, pipeline=scale_level(job.pipeline, predicted / seen))
        jobs.append(job)
    return replace(cluster, jobs=jobs)


def relevel(base: ClusterModel, levels: dict[str, float]) -> ClusterModel:
    """``base`` with each job in ``levels`` running at that many times its modelled rows/s (every
    time cost of its pipeline over the level, ``ingestion.calibrate.scale_level``)."""
    from dataclasses import replace

    from ingestion.calibrate import scale_level

    jobs = [replace(j, pipeline=scale_level(j.pipeline, 1.0 / levels[j.name])) if levels.get(j.name, 0) > 0 else j
            for j in base.jobs]
    return replace(base, jobs=jobs)


def refit_and_replan(cluster: ClusterModel, policy: LinearPolicy, plan: Plan, measured: dict[str, float],
                     **kwargs: Any) -> tuple[ClusterModel, Plan]:
    """Fine-tune on live measurements: re-level the model to what ``plan`` measured per job, let the
    node-level agent re-configure on the re-levelled pipelines, and re-plan from ``plan``."""
    refitted = refit_levels(cluster, plan, measured)
    new = replan(refitted, NodeTable(refitted), policy, plan, **kwargs)
    new.info["refit"] = {j: plan.result.supply[j] / v for j, v in measured.items() if v > 0 and j in plan.result.supply}
    return refitted, new
