"""The cluster-level agent: which units (nodes, or halves and quarters of nodes) of which instance
type feed which job.

The agent sees the problem as a table (:class:`Problem`): per job and unit, the rows/s the unit
delivers with the configuration its node-level agent chose, and the job's demand. An episode
starts from an empty pool (or from the current plan, when re-tuning) and adds one unit to one job
per step until every job is fed. Masked actions: a job already fed, a unit the job's pipeline
cannot run on (out of memory at any configuration), a unit that would take the pool past its
node count or the plan past its budget. So no plan the agent proposes overruns memory, nodes or
budget.

Policy: a softmax over the valid actions of a linear score of nine features per action (the
marginal dollars per useful row, the dollars per row of the unit at full use, how much of the
unit the job would use, whether it completes the job, the unit's share of a node, how unfed the
job still is, whether the unit fits in a node already paid for, the pool's node headroom after
the action, and the size of the unit's node type). It is trained with REINFORCE
(batch-normalised returns): pre-trained on random tables (``pretrain``; the weights ship as
``pretrained/cluster_policy.json``) and fine-tuned on the problem at hand before it plans.
Planning decodes the greedy episode and sampled ones, keeps the best, and improves it with masked
local moves (drop a unit the job does not need, swap a unit for a cheaper one that still feeds
the job, re-cover a job: one to three of its units for at most two others, re-type a node type:
all its units to the same shares of another type), the agent's own finishing step.
"""

from __future__ import annotations

import json
import time
from dataclasses import dataclass, field
from itertools import combinations_with_replacement
from pathlib import Path
from typing import Any, TypedDict

import numpy as np

from core.json_edge import JsonObject

N_FEATURES = 9
POLICY_FORMAT = "trainwise-intunex-cluster-policy"


@dataclass
class Problem:
    """The table the cluster agent plans on."""

    rows: np.ndarray  # (jobs, units) rows/s a unit delivers to a job; 0 = cannot run there
    demand: np.ndarray  # (jobs,)
    unit_type: np.ndarray  # (units,) index into type_price
    unit_frac: np.ndarray  # (units,) share of a node
    type_price: np.ndarray  # (types,) $/h of a whole node
    max_nodes: int
    budget: float | None = None
    objective: str = "throughput-per-usd"
    unit_vcpus: np.ndarray | None = None  # (units,) vCPUs of the unit's whole node type
    _lower_bound: float | None = field(default=None, init=False, repr=False, compare=False)

    @property
    def unit_price(self) -> np.ndarray:
        return self.type_price[self.unit_type] * self.unit_frac

    def lower_bound_cost(self) -> float:
        """Dollars per hour if every job ran on its cheapest rows at full use (no integrality);
        worked out once (every episode's score divides by it, and the table does not change)."""
        if self._lower_bound is None:
            with np.errstate(divide="ignore"):
                per_row = np.where(self.rows > 0, self.unit_price[None, :] / np.maximum(self.rows, 1e-12), np.inf)
            self._lower_bound = float(np.sum(self.demand * per_row.min(axis=1)))
        return self._lower_bound


class State:
    """Unit counts per job, and what follows from them."""

    def __init__(self, p: Problem, counts: np.ndarray | None = None):
        self.p = p
        self.counts = np.zeros_like(p.rows, dtype=np.int64) if counts is None else counts.astype(np.int64).copy()
        self.refresh()

    def refresh(self) -> None:
        self.supply = (self.counts * self.p.rows).sum(axis=1)
        self.shares = np.bincount(self.p.unit_type, weights=self.counts.sum(axis=0) * self.p.unit_frac,
                                  minlength=len(self.p.type_price))

    def copy(self) -> "State":
        return State(self.p, self.counts)

    @property
    def nodes(self) -> np.ndarray:
        return np.ceil(self.shares - 1e-9)

    @property
    def cost(self) -> float:
        return float(self.nodes @ self.p.type_price)

    @property
    def deficit(self) -> np.ndarray:
        return np.maximum(0.0, self.p.demand - self.supply)

    @property
    def fed(self) -> np.ndarray:
        return self.supply >= self.p.demand * (1 - 1e-9)

    @property
    def delivered(self) -> float:
        return float(np.minimum(self.supply, self.p.demand).sum())

    def add(self, j: int, u: int, n: int = 1) -> None:
        self.counts[j, u] += n
        self.supply[j] += n * self.p.rows[j, u]
        self.shares[self.p.unit_type[u]] += n * self.p.unit_frac[u]

    def marginal(self) -> tuple[np.ndarray, np.ndarray]:
        """Per unit: the extra $/h of adding one, and the pool's node count after it."""
        t, f = self.p.unit_type, self.p.unit_frac
        before = self.nodes
        after_t = np.ceil(self.shares[t] + f - 1e-9)
        extra = after_t - before[t]
        return extra * self.p.type_price[t], before.sum() + extra

    def valid(self) -> tuple[np.ndarray, np.ndarray]:
        """The action mask (jobs x units) and each unit's marginal cost."""
        mc, nodes_after = self.marginal()
        ok_unit = nodes_after <= self.p.max_nodes
        if self.p.budget is not None:
            ok_unit &= self.cost + mc <= self.p.budget * (1 + 1e-9)
        mask = (self.p.rows > 0) & ok_unit[None, :] & (self.deficit > 0)[:, None]
        return mask, mc

    def features(self, mask: np.ndarray, mc: np.ndarray) -> np.ndarray:
        p = self.p
        rows = np.maximum(p.rows, 1e-12)
        deficit = self.deficit[:, None]
        useful = np.maximum(np.minimum(rows, deficit), 1e-12)
        price = p.unit_price[None, :]
        phi = np.zeros(p.rows.shape + (N_FEATURES,))
        phi[..., 0] = -np.log((mc[None, :] + 0.1 * price) / useful)
        phi[..., 1] = -np.log(price / rows)
        for k in (0, 1):  # relative to the best valid action, so scales of rows and prices cancel
            best = phi[..., k][mask].max() if mask.any() else 0.0
            phi[..., k] -= best
        phi[..., 2] = useful / rows
        phi[..., 3] = (rows >= deficit).astype(float)
        phi[..., 4] = p.unit_frac[None, :]
        phi[..., 5] = deficit / np.maximum(p.demand[:, None], 1e-12)
        phi[..., 6] = (mc[None, :] <= 1e-12).astype(float)
        _, nodes_after = self.marginal()
        phi[..., 7] = (1.0 - nodes_after / max(1, p.max_nodes))[None, :]  # the pool's headroom after the action
        phi[..., 8] = (np.log2(p.unit_vcpus) / 6.0)[None, :] if p.unit_vcpus is not None else 0.0
        return phi


def score(state: State) -> float:
    """The episode's return: with every job fed, the cost lower bound over the cost (<= 1); for
    ``max-throughput`` the delivered share first; an unfed job is worth less than any fed plan."""
    p = state.p
    share = state.delivered / float(p.demand.sum())
    ratio = p.lower_bound_cost() / state.cost if state.cost > 0 else 0.0
    if p.objective == "max-throughput":
        return share + 0.01 * ratio
    return ratio if bool(state.fed.all()) else share - 1.0


class TrainingReport(TypedDict):
    """What :func:`reinforce` did: episodes run, the mean return of the first and last batches."""

    episodes: int
    mean_return_first: float | None
    mean_return_last: float | None
    train_s: float


class PolicyInfo(TypedDict, total=False):
    """Where a cluster policy came from (saved with it): its pre-training run and its source."""

    trained_on: str
    seed: int
    episodes: int
    mean_return_first: float | None
    mean_return_last: float | None
    train_s: float
    source: str  # pre-trained (file) or initial weights


class AgentPlanInfo(TypedDict):
    """How :func:`plan` found its state: the fine-tuning, the episodes decoded, the scores, the weights."""

    finetune: TrainingReport | dict[str, float]  # {} when there was no fine-tuning
    episodes_decoded: int
    score_before_moves: float
    score: float
    weights: list[float]
    plan_s: float


@dataclass
class LinearPolicy:
    weights: np.ndarray = field(default_factory=lambda: np.array([3.0, 1.0, 0.5, 0.5, 0.0, 0.0, 0.5, 0.0, 0.0]))
    info: PolicyInfo = field(default_factory=lambda: PolicyInfo())

    def probs(self, phi: np.ndarray, mask: np.ndarray) -> np.ndarray:
        logits = np.where(mask, phi @ self.weights, -np.inf)
        logits -= logits.max()
        e = np.exp(logits)
        return e / e.sum()

    def to_json(self) -> JsonObject:
        return {"format": POLICY_FORMAT, "features": N_FEATURES, "weights": self.weights.tolist(), "info": self.info}

    @classmethod
    def from_json(cls, doc: JsonObject) -> "LinearPolicy":
        if doc.get("format") != POLICY_FORMAT or int(doc.get("features", 0)) != N_FEATURES:
            raise ValueError(f"not a cluster policy with {N_FEATURES} features")
        return cls(np.asarray(doc["weights"], dtype=float), PolicyInfo(**doc.get("info", {})))

    def save(self, path: Path) -> None:
        from core.atomic import write_text

        write_text(path, json.dumps(self.to_json(), indent=1) + "\n")


def episode(policy: LinearPolicy, p: Problem, rng: np.random.Generator | None, start: State | None = None,
            max_steps: int = 2000) -> tuple[State, list[np.ndarray]]:
    """One episode; ``rng=None`` acts greedily. Returns the final state and, per step, the score
    gradient of the chosen action's log-probability."""
    state = start.copy() if start is not None else State(p)
    grads: list[np.ndarray] = []
    for _ in range(max_steps):
        mask, mc = state.valid()
        if not mask.any():
            break
        phi = state.features(mask, mc)
        pr = policy.probs(phi, mask)
        flat = pr.ravel()
        a = int(rng.choice(flat.size, p=flat)) if rng is not None else int(np.argmax(flat))
        j, u = divmod(a, p.rows.shape[1])
        if rng is not None:
            grads.append(phi[j, u] - np.tensordot(pr, phi, axes=([0, 1], [0, 1])))
        state.add(j, u)
    return state, grads


def reinforce(policy: LinearPolicy, sampler: Any, rng: np.random.Generator, *, episodes: int, batch: int = 8,
              lr: float = 0.05, time_limit_s: float | None = None) -> TrainingReport:
    """REINFORCE with a batch-mean baseline; ``sampler(rng)`` gives each batch's problem."""
    started, done, returns = time.monotonic(), 0, []
    while done < episodes:
        p = sampler(rng)
        runs = [episode(policy, p, rng) for _ in range(batch)]
        r = np.array([score(s) for s, _ in runs])
        adv = (r - r.mean()) / (r.std() + 1e-8)
        g = sum(a * np.sum(gs, axis=0) for a, (_, gs) in zip(adv, runs) if gs) / batch
        if isinstance(g, np.ndarray):
            policy.weights = policy.weights + lr * np.clip(g, -5, 5)
        done += batch
        returns.append(float(r.mean()))
        if time_limit_s is not None and time.monotonic() - started > time_limit_s:
            break
    return {"episodes": done, "mean_return_first": returns[0] if returns else None,
            "mean_return_last": returns[-1] if returns else None, "train_s": round(time.monotonic() - started, 2)}


def _better(a: State, b: State) -> bool:
    sa, sb = score(a), score(b)
    return sa > sb + 1e-12 or (abs(sa - sb) <= 1e-12 and a.counts.sum() < b.counts.sum())


def _allowed(s: State) -> bool:
    p = s.p
    if s.nodes.sum() > p.max_nodes:
        return False
    return p.budget is None or s.cost <= p.budget * (1 + 1e-9)


def _pair_additions(p: Problem, j: int) -> list[tuple[int, ...]]:
    """The sets of at most two units (each any the job runs on) a re-cover may add to job ``j``."""
    usable = [int(v) for v in np.flatnonzero(p.rows[j] > 0)]
    return [()] + [(v,) for v in usable] + [(v, w) for i, v in enumerate(usable) for w in usable[i:]]


def _removals(counts_j: np.ndarray, most: int = 3) -> list[tuple[int, ...]]:
    """The sets of one to ``most`` of a job's units (with multiplicity) a re-cover may take away;
    three lets a job trade three quarters for one half."""
    held = [int(u) for u in np.flatnonzero(counts_j)]
    out: list[tuple[int, ...]] = []
    for size in range(1, most + 1):
        out += [c for c in combinations_with_replacement(held, size)
                if all(c.count(u) <= counts_j[u] for u in set(c))]
    return out


def _costs(p: Problem, shares: np.ndarray) -> tuple[float, float, float]:
    """(whole-node $/h, node count, $/h of the shares used) of a pool holding ``shares`` per type."""
    nodes = np.ceil(shares - 1e-9)
    return float(nodes @ p.type_price), float(nodes.sum()), float(shares @ p.type_price)


def _additions_table(p: Problem, j: int, adds: list[tuple[int, ...]]) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Per addition of ``adds``: the rows it gives job ``j``, and the node shares per type of its
    first and of its second unit (zeros where it has none), so ``shares + first + second`` adds them
    in the order :func:`recover` does."""
    n, types = len(adds), len(p.type_price)
    rows, first, second = np.zeros(n), np.zeros((n, types)), np.zeros((n, types))
    for i, add in enumerate(adds):
        for k, v in enumerate(add):
            rows[i] += p.rows[j, v]
            (first if k == 0 else second)[i, p.unit_type[v]] = p.unit_frac[v]
    return rows, first, second


def _candidates(p: Problem, j: int, shares: np.ndarray, supply: float, table: tuple[np.ndarray, np.ndarray, np.ndarray],
                current: tuple[float, float]) -> np.ndarray:
    """The additions (indices, in order) that may pass :func:`recover`'s test after a removal left
    ``shares`` and ``supply``: every addition that passes is among them (the dollar sums, which a
    matrix product may round differently, get a margin), and recover tests each exactly."""
    rows, first, second = table
    trial = (shares[None, :] + first) + second
    nodes = np.ceil(trial - 1e-9)
    cost, used = nodes @ p.type_price, trial @ p.type_price
    slack = 1e-6 * max(1.0, abs(current[0]))
    ok = (supply + rows >= p.demand[j] * (1 - 1e-9) - slack) & (nodes.sum(axis=1) <= p.max_nodes + 0.5)
    if p.budget is not None:
        ok &= cost <= p.budget * (1 + 1e-9) + slack
    ok &= (cost < current[0] - 1e-9 + slack) | ((cost <= current[0] + 1e-9 + slack) & (used < current[1] - 1e-9 + slack))
    return np.flatnonzero(ok)


def recover(state: State) -> State | None:
    """One re-cover move, or None: take one to three units from a job and give it at most two others,
    any types and shares, so that the job stays fed and the plan (every job fed) costs less, or
    costs the same in whole nodes and uses fewer paid-for shares (which frees room in a node that
    a later move fills). This turns a whole node into a half and a quarter, or two or three units
    into one, which single swaps miss. The first such move in a fixed order (jobs, removals,
    additions); the additions are screened together (:func:`_candidates`) and the few left tested
    one by one."""
    p = state.p
    if p.objective == "max-throughput" or not bool(state.fed.all()):
        return None
    current = _costs(p, state.shares)[0::2]
    for j in range(p.rows.shape[0]):
        adds = _pair_additions(p, j)
        table = _additions_table(p, j, adds)
        for removal in _removals(state.counts[j]):
            shares, supply = state.shares.copy(), state.supply[j]
            for u in removal:
                shares[p.unit_type[u]] -= p.unit_frac[u]
                supply -= p.rows[j, u]
            for i in _candidates(p, j, shares, supply, table, current):
                add = adds[i]
                if removal == add or supply + sum(p.rows[j, v] for v in add) < p.demand[j] * (1 - 1e-9):
                    continue
                trial = shares.copy()
                for v in add:
                    trial[p.unit_type[v]] += p.unit_frac[v]
                cost, nodes, used = _costs(p, trial)
                if nodes > p.max_nodes or (p.budget is not None and cost > p.budget * (1 + 1e-9)):
                    continue
                if cost < current[0] - 1e-9 or (cost <= current[0] + 1e-9 and used < current[1] - 1e-9):
                    out = state.copy()
                    for u in removal:
                        out.add(j, u, -1)
                    for v in add:
                        out.add(j, v)
                    return out
    return None


def retype(state: State) -> State | None:
    """One re-type move, or None: every unit of one node type (whichever jobs hold them) moves to
    the unit of another type with as many vCPUs (a whole 2xlarge to half a 4xlarge, say), when
    every job stays fed and the plan costs less.
    In a pool short of nodes this is the move single-job moves cannot make: a node's occupants
    leave it together."""
    p = state.p
    if p.objective == "max-throughput" or not bool(state.fed.all()):
        return None
    size = p.unit_frac * (p.unit_vcpus if p.unit_vcpus is not None else 1.0)
    same_size = {(int(t), round(float(v), 6)): u for u, (t, v) in enumerate(zip(p.unit_type, size))}
    for t in np.flatnonzero(state.shares > 1e-9):
        held = np.flatnonzero((p.unit_type == t) & (state.counts.sum(axis=0) > 0))
        for other in range(len(p.type_price)):
            target = [same_size.get((other, round(float(size[u]), 6))) for u in held]
            if other == t or any(v is None for v in target):
                continue
            trial = state.copy()
            for u, v in zip(held, target):
                trial.counts[:, v] += trial.counts[:, u]
                trial.counts[:, u] = 0
            trial.refresh()
            if bool(trial.fed.all()) and _allowed(trial) and trial.cost < state.cost - 1e-9:
                return trial
    return None


def _used(s: State) -> float:
    """$/h of the node shares the plan uses (what it would cost if nodes came in any fraction)."""
    return float(s.shares @ s.p.type_price)


def trim_shares(state: State, max_rounds: int = 400) -> State:
    """Masked moves on the shares a plan uses rather than its whole nodes: drop a unit, or swap one
    for a smaller or cheaper one of the same job, while every job stays fed and the pool and budget
    hold, as long as the used shares cost less. It takes the surplus off each job (a job fed 1.4x on
    two quarters needs a quarter and a smaller unit), which leaves partly filled nodes that
    :func:`improve`'s whole-node moves then pack."""
    p = state.p
    if p.objective == "max-throughput" or not bool(state.fed.all()):
        return state
    best = state.copy()
    price = p.unit_price
    for _ in range(max_rounds):
        moved = False
        for j, u in zip(*np.nonzero(best.counts)):
            spare = best.supply[j] - p.rows[j, u] - p.demand[j] * (1 - 1e-9)
            options = [v for v in np.flatnonzero((p.rows[j] >= -spare) & (price < price[u] - 1e-12))]
            for v in [None] + sorted(options, key=lambda v: price[v]):
                if v is None and spare < 0:
                    continue
                trial = best.copy()
                trial.add(j, u, -1)
                if v is not None:
                    trial.add(j, v)
                if _allowed(trial):
                    best, moved = trial, True
                    break
            if moved:
                break
        if not moved:
            break
    return best


def improve(state: State, max_rounds: int = 50) -> State:
    """Masked local moves until none helps: drop one unit, swap one for another of the same job,
    or (when those are exhausted) a re-cover move (:func:`recover`) or a re-type move (:func:`retype`)."""
    best = state.copy()
    for _ in range(max_rounds):
        moved = False
        for j, u in zip(*np.nonzero(best.counts)):
            trial = best.copy()
            trial.add(j, u, -1)
            if _better(trial, best) and _allowed(trial):
                best, moved = trial, True
                break
            for v in np.flatnonzero(best.p.rows[j] > 0):
                if v == u:
                    continue
                swap = trial.copy()
                swap.add(j, v)
                if _allowed(swap) and _better(swap, best):
                    best, moved = swap, True
                    break
            if moved:
                break
        if not moved:
            moved_to = recover(best) or retype(best)
            if moved_to is None:
                break
            best = moved_to
    return best


def plan(policy: LinearPolicy, p: Problem, *, seed: int = 0, finetune_episodes: int = 96, samples: int = 24,
         start: State | None = None, time_limit_s: float = 60.0) -> tuple[State, AgentPlanInfo]:
    """Fine-tune the policy on ``p``, decode greedy and sampled episodes, keep the best, improve it."""
    rng = np.random.default_rng(seed)
    started = time.monotonic()
    tuned = LinearPolicy(policy.weights.copy(), PolicyInfo(**policy.info))
    train: TrainingReport | dict[str, float] = reinforce(tuned, lambda _rng: p, rng, episodes=finetune_episodes,
                                                         time_limit_s=0.5 * time_limit_s) if finetune_episodes else {}
    best, _ = episode(tuned, p, None, start)
    tried = 1
    for i in range(4 * samples):
        if time.monotonic() - started > 0.8 * time_limit_s:
            break
        if i >= samples and (bool(best.fed.all()) or p.objective == "max-throughput"):
            break  # more samples only while no decoded plan feeds every job
        s, _ = episode(tuned, p, rng, start)
        tried += 1
        if _better(s, best):
            best = s
    final = improve(best)
    trimmed = improve(trim_shares(best))
    if _better(trimmed, final):
        final = trimmed
    info: AgentPlanInfo = {"finetune": train, "episodes_decoded": tried, "score_before_moves": score(best),
            "score": score(final), "weights": tuned.weights.tolist(), "plan_s": round(time.monotonic() - started, 2)}
    return final, info
