"""An exact bound for the cluster problem: a mixed-integer program on the planner's own table.

The planner's cluster agent assigns units to jobs on a :class:`~optimizers.intunex.cluster_agent.Problem`
(rows/s per job and unit, with each unit's configuration chosen by the node-level agent). The
bound solves the same problem exactly with HiGHS (``scipy.optimize.milp``): integer unit counts
per job and unit, integer node counts per instance type (the units of a type pack into that
type's nodes), the pool's node count and the budget as constraints.

* ``throughput-per-usd`` and ``least-cost``: the least $/h that feeds every job (a fed job
  consumes exactly its demand, so this is the best throughput per dollar with every job fed).
* ``max-throughput``: the most rows delivered within the budget (each job's at most its demand),
  then the least cost that delivers them (a second MILP).

When HiGHS stops at its time limit before proving optimality, the bound is its dual bound (a
cost no assignment beats, or a throughput none exceeds), so ``gap_to_bound`` stays an honest
upper limit on how far a plan can be from the best on this table.
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass, replace
from typing import TypedDict

import numpy as np

from optimizers.intunex.cluster_agent import Problem, State


class BoundJson(TypedDict):
    """A :class:`Bound` as result files carry it."""

    solver: str
    usd_per_h: float | None
    delivered_rows_per_s: float | None
    metric: str
    best_possible: float | None
    proven_optimal: bool
    status: str
    solve_s: float


@dataclass(frozen=True)
class Bound:
    """The MILP's answer on one table: its best assignment and the bound it proved."""

    counts: np.ndarray | None  # (jobs, units) best assignment found, None when none is feasible
    usd_per_h: float | None  # cost of that assignment (whole nodes)
    delivered: float | None  # rows/s it delivers (each job's at most its demand)
    best_possible: float | None  # the figure (``metric``) no assignment on the table exceeds
    metric: str  # throughput_per_usd (every job fed), or delivered_rows_per_s (max-throughput)
    proven_optimal: bool
    status: str
    solve_s: float

    def gap(self, figure: float) -> float | None:
        """1 - a plan's figure (``metric``) over the bound's: 0 is as good as the bound; None without one."""
        if not self.best_possible:
            return None
        return max(0.0, 1.0 - figure / self.best_possible)

    def to_json(self) -> BoundJson:
        return {"solver": "HiGHS MILP (scipy.optimize.milp)", "usd_per_h": self.usd_per_h,
                "delivered_rows_per_s": self.delivered, "metric": self.metric, "best_possible": self.best_possible,
                "proven_optimal": self.proven_optimal, "status": self.status, "solve_s": round(self.solve_s, 2)}


def _matrices(p: Problem, pairs: list[tuple[int, int]], extra: int):
    """Constraint rows over [x_pairs, n_types, extra...]: feed (jobs), pack (types), pool, cost."""
    from scipy.sparse import lil_matrix

    n_jobs, n_types, n_pairs = p.rows.shape[0], len(p.type_price), len(pairs)
    n = n_pairs + n_types + extra
    supply = lil_matrix((n_jobs, n))
    pack = lil_matrix((n_types, n))
    for k, (j, u) in enumerate(pairs):
        supply[j, k] = p.rows[j, u]
        pack[p.unit_type[u], k] = p.unit_frac[u]
    for t in range(n_types):
        pack[t, n_pairs + t] = -1.0
    pool = np.zeros(n)
    pool[n_pairs:n_pairs + n_types] = 1.0
    cost = np.zeros(n)
    cost[n_pairs:n_pairs + n_types] = p.type_price
    return supply.tocsr(), pack.tocsr(), pool, cost


def solve_bound(p: Problem, time_limit_s: float = 30.0, objective: str | None = None) -> Bound:
    """The MILP on ``p`` (see the module docstring); ``objective`` defaults to the problem's."""
    from scipy.optimize import Bounds, LinearConstraint, milp

    started = time.monotonic()
    objective = objective or p.objective
    n_jobs = p.rows.shape[0]
    n_types = len(p.type_price)
    pairs = [(j, u) for j in range(n_jobs) for u in range(p.rows.shape[1]) if p.rows[j, u] > 0]
    most = [math.ceil(p.demand[j] / p.rows[j, u]) for j, u in pairs]  # more units than feed the job never pay
    maximise = objective == "max-throughput"
    extra = n_jobs if maximise else 0
    supply, pack, pool, cost = _matrices(p, pairs, extra)
    n = len(pairs) + n_types + extra
    constraints = [LinearConstraint(pack, -np.inf, 0.0), LinearConstraint(pool[None, :], 0.0, p.max_nodes)]
    if p.budget is not None:
        constraints.append(LinearConstraint(cost[None, :], 0.0, p.budget))
    upper = np.array(most + [p.max_nodes] * n_types + list(p.demand) * int(maximise), dtype=float)
    integrality = np.r_[np.ones(len(pairs) + n_types), np.zeros(extra)]
    if maximise:  # delivered_j <= supply_j, delivered_j <= demand_j (its upper bound); cost breaks ties
        from scipy.sparse import hstack, identity

        take = hstack([supply[:, :len(pairs) + n_types], -identity(n_jobs)]).tocsr()
        constraints.append(LinearConstraint(take, 0.0, np.inf))
        c = -np.r_[np.zeros(len(pairs) + n_types), np.ones(n_jobs)]
    else:
        constraints.append(LinearConstraint(supply, p.demand, np.inf))
        c = cost
    res = milp(c, constraints=constraints, integrality=integrality, bounds=Bounds(0, upper),
               options={"time_limit": time_limit_s})
    if maximise and res.x is not None:  # then the least cost that delivers those rows (lexicographic)
        rows = np.r_[np.zeros(len(pairs) + n_types), np.ones(n_jobs)]
        first = _answer(p, pairs, res, True, 0.0)
        least = milp(cost, constraints=constraints + [LinearConstraint(rows[None, :], first.delivered * (1 - 1e-6), np.inf)],
                     integrality=integrality, bounds=Bounds(0, upper), options={"time_limit": time_limit_s})
        if least.x is not None:
            return replace(_answer(p, pairs, least, True, time.monotonic() - started),
                           best_possible=first.best_possible, proven_optimal=first.proven_optimal)
    return _answer(p, pairs, res, maximise, time.monotonic() - started)


def _answer(p: Problem, pairs: list[tuple[int, int]], res, maximise: bool, seconds: float) -> Bound:
    if res.x is None:
        return Bound(None, None, None, None, "delivered_rows_per_s" if maximise else "throughput_per_usd",
                     False, str(res.message), seconds)
    counts = np.zeros(p.rows.shape, dtype=np.int64)
    for k, (j, u) in enumerate(pairs):
        counts[j, u] = int(round(res.x[k]))
    state = State(p, counts)
    dual = getattr(res, "mip_dual_bound", None)
    proven = res.status == 0
    usable = dual is not None and np.isfinite(dual)
    if maximise:  # the rows no assignment within the budget exceeds (the objective is -rows)
        best = state.delivered if proven or not usable else max(state.delivered, -float(dual))
        metric = "delivered_rows_per_s"
    else:  # every job fed: throughput per dollar is the total demand over the least cost
        lowest = state.cost if proven or not usable else min(state.cost, float(dual))
        best = float(p.demand.sum()) * 3600.0 / lowest if lowest > 0 else None
        metric = "throughput_per_usd"
    return Bound(counts, state.cost, state.delivered, best, metric, proven, str(res.message), seconds)
