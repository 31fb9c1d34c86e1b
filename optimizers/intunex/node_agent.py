"""Node-level agents: one shared policy splits each node's CPUs between a pipeline's stages.

The node-level agent is InTune's: the same action-masked DQN (``optimizers.intune``, the
committed pre-trained weights), the same observation and the same masks (never over the CPU
budget, never a configuration whose predicted memory passes the margin of the unit's RAM). On
the cluster model it acts greedily from the better of the space's initial configuration and
tf.data AUTOTUNE's (modelled) choice, for up to ``steps`` moves, never revisiting a
configuration, ranking moves as InTune does: the shipped agent is a gamma-0 residual over the
model's predicted log gain, so a move's rank is its Q-value plus that gain; then a masked steepest
ascent on the model, looking two moves ahead where no single move gains, polishes the best configuration seen (InTune's own start does the same on the calibrated
simulator).

:class:`NodeTable` memoises the result per pipeline, unit size and family speed, so a node type
that appears in many plans (or in many jobs with the same pipeline) is tuned once. Its other methods give
what the baselines use: AUTOTUNE's configuration, and the exhaustive grid (the oracle). With
``processes`` > 1 it tunes what a planning table lacks in forked processes
(:mod:`optimizers.intunex.node_pool`): each tuning is deterministic and independent of the others,
so the table is the same.

Within one tuning, the simulator's results (by configuration) and the masker's answers
(:class:`TuningMasker`: safety and action targets, by configuration) are memoised: the agent's
ranking, its observation and the polish visit the same configurations many times.
"""

from __future__ import annotations

import itertools
import math
from dataclasses import dataclass
from typing import Iterator, NotRequired, TypedDict

import numpy as np

from ingestion.cluster.model import ClusterModel, JobModel, Unit
from ingestion.knobs import Config, KnobSpace
from ingestion.node import Node
from ingestion.measurement import Measurement
from ingestion.simulator import PipelineModel, simulate as _simulate
from optimizers.baselines.autotune_model import hill_climb
from optimizers.intune.agent import MaskedDQN
from optimizers.intune.env import ACTIONS, STOP, Masker, apply_action, check_layout, observe

MEMORY_MARGIN = 0.85
#: Weight of the model's predicted log gain in a move's rank (InTune's ``model_weight``).
MODEL_WEIGHT = 1.0
#: How many of the best single moves the polish looks one move past when none gains on its own.
LOOKAHEAD = 8
METHODS = ("intunex", "autotune", "exhaustive")


@dataclass(frozen=True)
class NodeChoice:
    """A unit's configuration for one pipeline and its simulated rows/s (before service overheads)."""

    config: Config
    rows_per_s: float
    source: str
    evaluations: int = 0


class NodeChoiceRow(TypedDict):
    """A memoised :class:`NodeChoice` as the cached cluster profile holds it (``config`` None: no
    configuration fits the unit)."""

    method: str
    job: str  # the first job of the cluster with that pipeline
    vcpus: int
    ram_gib: float
    speed: float
    config: Config | None
    rows_per_s: NotRequired[float]
    source: NotRequired[str]
    evaluations: NotRequired[int]


#: Per tuning call: simulated results by (model, node, configuration); the agent's ranking and the
#: polish visit the same configurations many times. Scoped to one :func:`tune_node` call, in which
#: the model objects stay alive, so their ids identify them.
_CACHE: dict[tuple, Measurement] | None = None


def simulate(model: PipelineModel, config: Config, node: Node) -> Measurement:
    """The simulator, memoised within one node-level tuning call."""
    if _CACHE is None:
        return _simulate(model, config, node)
    key = (id(model), node.vcpus, node.ram_gib, tuple(sorted(config.items())))
    hit = _CACHE.get(key)
    if hit is None:
        hit = _CACHE[key] = _simulate(model, config, node)
    return hit


class TuningMasker(Masker):
    """InTune's masker with each configuration's safety and action targets memoised: within one
    tuning the space, node and model are fixed and nothing is learnt (no measured memory, no
    failure), so both are functions of the configuration alone. The lists it returns are shared:
    read them, do not change them."""

    def __init__(self, space: KnobSpace, node: Node, belief: PipelineModel, memory_margin: float = MEMORY_MARGIN):
        super().__init__(space, node, belief, memory_margin)
        self._safe: dict[tuple, bool] = {}
        self._targets: dict[tuple, list[Config | None]] = {}

    def safe(self, config: Config) -> bool:
        key = self.key(config)
        hit = self._safe.get(key)
        if hit is None:
            hit = self._safe[key] = super().safe(config)
        return hit

    def targets(self, config: Config) -> list[Config | None]:
        key = self.key(config)
        hit = self._targets.get(key)
        if hit is None:
            hit = self._targets[key] = super().targets(config)
        return hit


def _score(model: PipelineModel, config: Config, node: Node, masker: Masker) -> float:
    return simulate(model, config, node).score if masker.safe(config) else -math.inf


def _neighbours(model: PipelineModel, node: Node, masker: Masker, config: Config) -> list[tuple[float, Config]]:
    """Every memory-safe single move from ``config`` with its score on the model."""
    return [(simulate(model, c, node).score, c) for i, c in enumerate(masker.targets(config))
            if c is not None and i != STOP]


def _lookahead(model: PipelineModel, node: Node, masker: Masker, scored: list[tuple[float, Config]],
               floor: float) -> tuple[float, Config, int] | None:
    """The best two-move step whose first move is one of the ``LOOKAHEAD`` best single moves (even
    a losing one, such as a smaller prefetch buffer that frees memory for a larger batch), if it
    beats ``floor``; with the evaluations it took."""
    evaluations, best = 0, None
    for _, first in sorted(scored, key=lambda xc: -xc[0])[:LOOKAHEAD]:
        second = _neighbours(model, node, masker, first)
        evaluations += len(second)
        if second:
            x, c = max(second, key=lambda xc: xc[0])
            if x > floor * (1 + 1e-9) and (best is None or x > best[0]):
                best = (x, c)
    return (best[0], best[1], evaluations) if best else None


def polish(model: PipelineModel, node: Node, masker: Masker, start: Config, max_rounds: int = 40) -> tuple[Config, float, int]:
    """Masked steepest ascent over single moves from ``start`` on the model; where no single move
    gains, a two-move step (:func:`_lookahead`) may still, as the exhaustive grid would find."""
    current, current_x, evaluations = dict(start), _score(model, start, node, masker), 1
    for _ in range(max_rounds):
        scored = _neighbours(model, node, masker, current)
        evaluations += len(scored)
        if not scored:
            break
        x, c = max(scored, key=lambda xc: xc[0])
        if x <= current_x * (1 + 1e-9):
            step = _lookahead(model, node, masker, scored, current_x)
            if step is None:
                break
            x, c, n = step
            evaluations += n
        current, current_x = c, x
    return current, current_x, evaluations


def ranked_move(agent: MaskedDQN, obs, model: PipelineModel, space: KnobSpace, node: Node, config: Config,
                mask, targets: list[Config | None] | None = None) -> int:
    """InTune's ranking of the valid actions (``optimizers.intune.phases.step.rank_moves``): the
    shipped agent's Q-value, a gamma-0 residual over the model's predicted log gain, plus that
    gain (``MODEL_WEIGHT`` times it); "stop" is ranked by its Q-value alone. The top action.
    ``targets`` (optional): each action's configuration from ``config``, as the masker gave them."""
    q = agent.q_values(obs).astype(float)
    base_x = max(simulate(model, config, node).rows_per_s, 1e-9)
    valid = np.flatnonzero(mask)
    for a in valid:
        if a != STOP:
            target = targets[a] if targets is not None else apply_action(space, config, ACTIONS[a])
            assert target is not None
            q[a] += MODEL_WEIGHT * math.log(max(simulate(model, target, node).rows_per_s, 1e-9) / base_x)
    return int(valid[np.argmax(q[valid])])


def agent_rollout(agent: MaskedDQN, model: PipelineModel, space: KnobSpace, node: Node, masker: Masker,
                  start: Config, steps: int = 24) -> tuple[Config, float, int]:
    """The agent's greedy masked episode from ``start``, moves ranked as InTune ranks them
    (:func:`ranked_move`); the best configuration it visited."""
    config, m = dict(start), simulate(model, start, node)
    start_x = best_x = max(m.rows_per_s, 1e-9)
    best, visited, improved = dict(config), {Masker.key(config)}, False
    for t in range(steps):
        obs = observe(space, node, model, config, m, start_rows_per_s=start_x, best_rows_per_s=best_x,
                      progress=t / steps, improved=improved)
        mask = masker.mask(config, exclude=visited)
        if not mask.any():
            break
        action = ranked_move(agent, obs, model, space, node, config, mask, masker.targets(config))
        if action == STOP:
            break
        new = apply_action(space, config, ACTIONS[action])
        assert new is not None
        nm = simulate(model, new, node)
        visited.add(Masker.key(new))
        improved = nm.rows_per_s > m.rows_per_s
        config, m = new, nm
        if nm.score > best_x:
            best, best_x = dict(new), nm.score
    return best, best_x, len(visited)


def tune_node(agent: MaskedDQN, model: PipelineModel, space: KnobSpace, node: Node) -> NodeChoice:
    """The node-level agent on one unit (see the module docstring)."""
    global _CACHE
    _CACHE = {}
    try:
        return _tune_node(agent, model, space, node)
    finally:
        _CACHE = None


def _tune_node(agent: MaskedDQN, model: PipelineModel, space: KnobSpace, node: Node) -> NodeChoice:
    check_layout(space)
    masker = TuningMasker(space, node, model, MEMORY_MARGIN)
    starts = [space.initial(), hill_climb(model, space, node)[0]]
    start = max(starts, key=lambda c: _score(model, c, node, masker))
    if not masker.safe(start):
        return NodeChoice(start, 0.0, "no memory-safe start")
    best, _, n1 = agent_rollout(agent, model, space, node, masker, start)
    config, x, n2 = polish(model, node, masker, best)
    return NodeChoice(config, max(x, 0.0), "intune agent + masked ascent on the cluster model", n1 + n2)


def autotune_node(model: PipelineModel, space: KnobSpace, node: Node) -> NodeChoice:
    """tf.data AUTOTUNE's configuration (the hill-climbing model of ``optimizers.baselines.autotune_model``)."""
    config, _ = hill_climb(model, space, node)
    m = simulate(model, config, node)
    return NodeChoice(config, 0.0 if m.failed else m.rows_per_s, "model of tf.data AUTOTUNE", 1)


def _monotone(space: KnobSpace) -> list[str]:
    """Buffer knobs of a prefetch stage: more is never slower on the model, only bigger."""
    return [k.name for k in space.knobs if k.kind == "buffer" and k.stage == "prefetch"]


def _grid_without(space: KnobSpace, skip: list[str]) -> Iterator[Config]:
    knobs = [k for k in space.knobs if k.name not in skip]
    for values in itertools.product(*(k.values for k in knobs)):
        config = dict(zip((k.name for k in knobs), values))
        if sum(config[k.name] for k in space.cpu_knobs) <= space.cpu_budget:
            yield config


def exhaustive_node(model: PipelineModel, space: KnobSpace, node: Node) -> NodeChoice:
    """The best memory-safe configuration of the whole grid. Prefetch buffers only add throughput
    and memory on the model, so each takes its largest memory-safe value instead of every value."""
    masker = Masker(space, node, model, MEMORY_MARGIN)
    skip = _monotone(space)
    best, best_x, count = space.initial(), -math.inf, 0
    for partial in _grid_without(space, skip):
        config = dict(partial)
        for name in skip:
            values = space.knob(name).values
            config[name] = values[0]
            for v in reversed(values):
                if masker.safe({**config, name: v}):
                    config[name] = v
                    break
        if not masker.safe(config):
            continue
        count += 1
        x = simulate(model, config, node).score
        if x > best_x:
            best, best_x = config, x
    return NodeChoice(best, max(best_x, 0.0), "exhaustive grid on the cluster model", count)


class NodeTable:
    """Per job and unit: the chosen configuration and the rows/s it delivers, per method."""

    def __init__(self, cluster: ClusterModel, agent: MaskedDQN | None = None, processes: int = 1):
        self.cluster = cluster
        self.agent = agent
        #: Processes that fill the table (:meth:`fill_units`); 1 tunes in this process.
        self.processes = processes
        self._memo: dict[tuple, NodeChoice | None] = {}

    def fill_units(self, units: list[Unit], method: str) -> "NodeTable":
        """Tune every job on every unit of ``units`` with ``method`` that the table lacks, in
        ``processes`` processes (:mod:`optimizers.intunex.node_pool`); the choices are the same
        as the serial loop's."""
        from optimizers.intunex.node_pool import tune_parallel

        for key, sent in tune_parallel(self, units, method, self.processes).items():
            self._memo[key] = None if sent is None else NodeChoice(dict(sent[0]), *sent[1:])
        return self

    def known(self, key: tuple) -> bool:
        """Whether the table holds the choice of memo key ``key`` (:meth:`key`)."""
        return key in self._memo

    def key(self, job: JobModel, unit: Unit, method: str) -> tuple:
        """The memo's key: one tuning per method, pipeline, unit size and family speed."""
        node = unit.node
        return method, job.key, node.vcpus, round(node.ram_gib, 6), self.cluster.speed(unit)

    def fill(self, methods: tuple[str, ...] = ("intunex", "autotune")) -> "NodeTable":
        """Compute every job's choice on every unit for ``methods`` (the cluster profile)."""
        for method in methods:
            self.fill_units(self.cluster.units(), method)
            for job in self.cluster.jobs:
                for unit in self.cluster.units():
                    self.choice(job, unit, method)
        return self

    def to_json(self) -> list[NodeChoiceRow]:
        """The memoised choices as JSON rows (pipelines named by the first job that has them)."""
        names = {}
        for job in self.cluster.jobs:
            names.setdefault(job.key, job.name)
        return [{"method": m, "job": names[k], "vcpus": v, "ram_gib": r, "speed": f,
                 **({"config": c.config, "rows_per_s": c.rows_per_s, "source": c.source, "evaluations": c.evaluations}
                    if c else {"config": None})}
                for (m, k, v, r, f), c in self._memo.items() if k in names]

    def load_json(self, rows: list[NodeChoiceRow]) -> "NodeTable":
        """Restore choices written by :meth:`to_json` for the jobs of this table's cluster."""
        keys = {job.name: job.key for job in self.cluster.jobs}
        for row in rows:
            if row["job"] not in keys:
                continue
            key = (row["method"], keys[row["job"]], int(row["vcpus"]), float(row["ram_gib"]), float(row.get("speed", 1.0)))
            self._memo[key] = None if row["config"] is None else NodeChoice(
                {k: int(v) for k, v in row["config"].items()}, float(row["rows_per_s"]), str(row["source"]),
                int(row.get("evaluations", 0)))
        return self

    def choice(self, job: JobModel, unit: Unit, method: str = "intunex") -> NodeChoice | None:
        """The unit's configuration for ``job`` (None if the pipeline cannot run on the unit)."""
        node = unit.node
        key = self.key(job, unit, method)
        if key not in self._memo:
            space = self.cluster.space(job, unit)
            pipeline = self.cluster.pipeline_on(job, unit)
            if space is None:
                self._memo[key] = None
            elif method == "autotune":
                self._memo[key] = autotune_node(pipeline, space, node)
            elif method == "exhaustive":
                self._memo[key] = exhaustive_node(pipeline, space, node)
            else:
                if self.agent is None:
                    from optimizers.intunex.policies import node_agent

                    self.agent = node_agent()
                self._memo[key] = tune_node(self.agent, pipeline, space, node)
        return self._memo[key]

    def rows(self, job: JobModel, unit: Unit, method: str = "intunex") -> float:
        """Rows/s the unit delivers to the job's trainers with the method's configuration."""
        c = self.choice(job, unit, method)
        if c is None or c.rows_per_s <= 0:
            return 0.0
        rows, oom = self.cluster.node_rows_per_s(job, unit, c.config)
        return 0.0 if oom else rows
