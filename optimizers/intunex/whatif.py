"""What-if clusters: a seeded synthetic jobs file of a given size, planned without a cluster.

:func:`synthetic_spec` draws ``jobs`` jobs of mixed synthetic pipelines (read-, parse- and
transform-bound, stage costs drawn per job) on a pool of ``nodes`` nodes of ``types`` instance
types (mixed x86 and Graviton families, xlarge to 8xlarge). The jobs together need
``fill`` (drawn in 0.3-0.6) of the pool in nodes of the pool's median type under tf.data
AUTOTUNE's modelled configuration, split between the jobs by log-uniform shares, so the pool can
feed every job and the planner has room to choose. Every figure planned on it is simulated.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, TypedDict

import numpy as np

from core.errors import UserError
from ingestion.cluster.instances import by_name
from ingestion.cluster.jobs import JobsFile, parse_jobs
from ingestion.cluster.model import ClusterModel, Unit, synthetic_job

FAMILIES = ("c7i", "c6i", "c7g", "m7i", "m7g", "r7i")
SIZES = ("xlarge", "2xlarge", "4xlarge", "8xlarge")
KINDS = ("read", "parse", "transform")
MAX_TYPES = len(FAMILIES) * len(SIZES)


def check_size(nodes: int, jobs: int, types: int) -> None:
    """A what-if the planner can take: at least one job, no more jobs than nodes, 1-24 types."""
    if nodes < 1 or jobs < 1:
        raise UserError(f"--what-if: nodes and jobs must be >= 1, got nodes={nodes}, jobs={jobs}")
    if jobs > nodes:
        raise UserError(f"--what-if: more jobs ({jobs}) than nodes ({nodes}); give at most one job per node")
    if not 1 <= types <= MAX_TYPES:
        raise UserError(f"--what-if: types must be 1-{MAX_TYPES}, got {types}")


def pick_types(rng: np.random.Generator, count: int) -> list[str]:
    """``count`` types of the table's xlarge-8xlarge sizes, at least one Graviton and one x86 when count >= 2."""
    names = [f"{f}.{s}" for f in FAMILIES for s in SIZES]
    chosen = list(rng.choice(names, size=count, replace=False))
    if count >= 2 and not any(n.split(".")[0].endswith("g") for n in chosen):
        chosen[0] = f"c7g.{chosen[0].split('.')[1]}"
    if count >= 2 and all(n.split(".")[0].endswith("g") for n in chosen):
        chosen[0] = f"c7i.{chosen[0].split('.')[1]}"
    return sorted(set(chosen)) if len(set(chosen)) == count else sorted(chosen)


class SyntheticJob(TypedDict):
    """One job of a synthetic jobs file, as the jobs file's ``jobs:`` list holds it."""

    name: str
    demand_rows_per_s: int
    pipeline: str  # a synthetic pipeline's kind: read-, parse- or transform-bound
    seed: int


def synthetic_spec(nodes: int, jobs: int, types: int = 12, seed: int = 0) -> JobsFile:
    """A validated jobs file of ``jobs`` jobs on a pool of ``nodes`` nodes of ``types`` types (see the module)."""
    check_size(nodes, jobs, types)
    rng = np.random.default_rng(seed)
    names = pick_types(rng, types)
    while len(set(names)) < types:
        names = pick_types(rng, types)
    median = sorted((by_name(n) for n in names), key=lambda t: (t.vcpus, t.usd_per_hour))[len(names) // 2]
    reference = ClusterModel([], [median], nodes)
    from optimizers.intunex.node_agent import NodeTable

    table = NodeTable(reference)
    fill = float(rng.uniform(0.3, 0.6))
    shares = np.exp(rng.uniform(np.log(0.4), np.log(1.6), size=jobs))
    out: list[SyntheticJob] = []
    for i in range(jobs):
        kind, pipeline_seed = KINDS[int(rng.integers(3))], int(rng.integers(1_000_000))
        per_node = table.rows(synthetic_job("probe", 1.0, kind, pipeline_seed), Unit(median), "autotune")
        out.append({"name": f"job{i}", "demand_rows_per_s": max(1, round(per_node * nodes * fill * shares[i] / shares.sum())),
                    "pipeline": f"{kind}-bound", "seed": pipeline_seed})
    return parse_jobs({"pool": {"max_nodes": nodes, "instance_types": names}, "jobs": out}, f"what-if seed {seed}")


def parse_what_if(text: str) -> tuple[int, int, int, int]:
    """``nodes=100,jobs=40[,types=12][,seed=0]`` -> (nodes, jobs, types, seed); one line on a mistake."""
    allowed = ("nodes", "jobs", "types", "seed")
    values = {"types": 12, "seed": 0}
    for part in (p.strip() for p in text.split(",") if p.strip()):
        key, eq, value = part.partition("=")
        if not eq or key.strip() not in allowed:
            raise UserError(f"--what-if: {part!r} is not KEY=N; keys: {', '.join(allowed)} (e.g. nodes=100,jobs=40)")
        try:
            values[key.strip()] = int(value)
        except ValueError:
            raise UserError(f"--what-if: {key.strip()} must be a whole number, got {value!r}") from None
    missing = [k for k in ("nodes", "jobs") if k not in values]
    if missing:
        raise UserError(f"--what-if: {' and '.join(missing)} missing (e.g. nodes=100,jobs=40)")
    if values["seed"] < 0:
        raise UserError(f"--what-if: seed must be >= 0, got {values['seed']}")
    check_size(values["nodes"], values["jobs"], values["types"])
    return values["nodes"], values["jobs"], values["types"], values["seed"]


class BudgetRow(TypedDict):
    """A :class:`BudgetPoint` as the what-if's ``budget_front`` lists it."""

    budget_usd_per_h: float
    plan_usd_per_h: float
    plan_delivered_rows_per_s: float
    plan_throughput_per_usd: float
    plan_all_fed: bool
    bound_delivered_rows_per_s: float | None
    bound_usd_per_h: float | None
    bound_proven: bool
    solver_delivered_rows_per_s: float | None
    bound_throughput_per_usd: float | None


@dataclass(frozen=True)
class BudgetPoint:
    """At one budget: what InTuneX's plan (objective max-throughput) and the exact bound deliver."""

    budget_usd_per_h: float
    plan_usd_per_h: float
    plan_delivered_rows_per_s: float
    plan_throughput_per_usd: float
    plan_all_fed: bool
    bound_delivered_rows_per_s: float | None  # rows no plan within the budget exceeds (the solver's bound)
    bound_usd_per_h: float | None  # cost of the solver's best assignment
    bound_proven: bool
    solver_delivered_rows_per_s: float | None = None  # rows of the solver's best assignment

    @property
    def bound_throughput_per_usd(self) -> float | None:
        """Throughput per dollar of the exact solver's best assignment (its rows over its cost; the
        best possible when ``bound_proven``)."""
        if not self.solver_delivered_rows_per_s or not self.bound_usd_per_h:
            return None
        return self.solver_delivered_rows_per_s * 3600.0 / self.bound_usd_per_h

    def to_json(self) -> BudgetRow:
        return {"budget_usd_per_h": self.budget_usd_per_h, "plan_usd_per_h": self.plan_usd_per_h,
                "plan_delivered_rows_per_s": self.plan_delivered_rows_per_s,
                "plan_throughput_per_usd": self.plan_throughput_per_usd, "plan_all_fed": self.plan_all_fed,
                "bound_delivered_rows_per_s": self.bound_delivered_rows_per_s, "bound_usd_per_h": self.bound_usd_per_h,
                "bound_proven": self.bound_proven, "solver_delivered_rows_per_s": self.solver_delivered_rows_per_s,
                "bound_throughput_per_usd": self.bound_throughput_per_usd}


def budget_sweep(cluster: ClusterModel, nodes: Any, policy: Any, full_usd_per_h: float, *, seed: int = 0,
                 fractions: tuple[float, ...] = (0.25, 0.4, 0.55, 0.7, 0.85, 1.0, 1.2),
                 bound_time_limit_s: float = 20.0) -> list[BudgetPoint]:
    """Plan at each budget (``fractions`` of ``full_usd_per_h``, the all-fed plan's cost) for the most
    rows delivered, and solve the bound there: the front of throughput per dollar against budget.
    Where the budget covers InTuneX's plan that feeds every job at least cost, that plan is the point."""
    from dataclasses import replace

    from optimizers.intunex.bound import solve_bound
    from optimizers.intunex.planner import planning_table, plan_intunex

    out = []
    fed = plan_intunex(cluster, nodes, policy, seed=seed)
    for f in fractions:
        budget = full_usd_per_h * f
        capped = replace(cluster, budget_usd_per_h=budget)
        if fed.result.all_fed and fed.result.usd_per_h <= budget:
            plan = fed  # every row is delivered at least cost: no plan within this budget delivers more
        else:
            plan = plan_intunex(capped, nodes, policy, objective="max-throughput", seed=seed)
        found = solve_bound(planning_table(capped, nodes, "intunex", "max-throughput").problem, bound_time_limit_s)
        out.append(BudgetPoint(budget, plan.result.usd_per_h, plan.result.delivered, plan.result.throughput_per_usd,
                               plan.result.all_fed, found.best_possible, found.usd_per_h, found.proven_optimal,
                               found.delivered))
    return out
