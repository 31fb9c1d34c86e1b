"""The InTune tuning MDP as a gymnasium environment, with action masking.

State (a fixed-size vector, so one network serves any pipeline with up to ``MAX_CPU`` parallel
stages and ``MAX_OTHER`` other knobs, on any node):

- per CPU slot: present, allocation (threads / budget), utilisation (overall throughput over the
  stage's capacity in the pipeline model), whether it may grow, whether it may shrink;
- per other-knob slot: present, position in its value list, kind (batch / buffer / other);
- memory use as a fraction of the RAM budget, CPU threads used over budget, node size,
  throughput relative to the start and to the best seen, episode progress, last step improved.

Actions (``Discrete``): add or remove one unit of CPU at a stage, move one unit from one stage to
another, step a non-CPU knob up or down, or stop. :meth:`InTuneEnv.action_masks` marks the valid
ones: the new configuration must be in the knob space (values and CPU budget), must not have been
rejected as out of memory, and its memory predicted by the pipeline model must stay under
``memory_margin`` of the node's RAM budget. So no invalid or over-budget configuration is ever
proposed by a masked policy.

Reward: ``log(X_new / X_old)`` (the episode's return telescopes to the log of the final gain),
minus ``memory_penalty * max(0, mem_fraction - memory_soft)``; out of memory costs
``oom_reward`` and ends the episode (it cannot happen under the mask; an unmasked random action
that is invalid is a no-op with ``invalid_reward``).

The environment evaluates configurations through a callable (``evaluate(config) ->
Measurement``), so the same code runs on the simulator (pre-training) and on the live pipeline
(fine-tuning). Its *belief* model (the calibrated simulator) supplies per-stage capacities and the
memory prediction for the mask; in pre-training the belief is a perturbed copy of the true
simulated pipeline, so the agent learns to work with an imperfect profile.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Callable, Iterable, Mapping, TypedDict

import gymnasium as gym
import numpy as np

from ingestion.knobs import KnobSpace
from ingestion.node import Node
from ingestion.simulator import (
    PIPELINE_KINDS,
    SIM_NODES,
    PipelineModel,
    dlrm_like_space,
    memory_mb,
    random_pipeline,
    simulate,
)
from ingestion.simulator import servers, solve_servers
from ingestion.measurement import Config, Measurement

MAX_CPU = 6
MAX_OTHER = 6
CPU_FEATURES = 5
OTHER_FEATURES = 5
GLOBAL_FEATURES = 7
OBS_DIM = MAX_CPU * CPU_FEATURES + MAX_OTHER * OTHER_FEATURES + GLOBAL_FEATURES
#: Clip of a residual reward (log units): a crash or a wild measurement must not dominate.
RESIDUAL_CLIP = 2.0
OBS_VERSION = 2  # 2: the agent's Q-values are residuals over the model's predicted log gain

Action = tuple  # ("inc", i) | ("dec", i) | ("move", i, j) | ("up", m) | ("down", m) | ("stop",)


def _action_table() -> list[Action]:
    table: list[Action] = []
    for i in range(MAX_CPU):
        table += [("inc", i), ("dec", i)]
    for i in range(MAX_CPU):
        for j in range(MAX_CPU):
            if i != j:
                table.append(("move", i, j))
    for m in range(MAX_OTHER):
        table += [("up", m), ("down", m)]
    table.append(("stop",))
    return table


ACTIONS: list[Action] = _action_table()
N_ACTIONS = len(ACTIONS)
STOP = N_ACTIONS - 1


@dataclass
class Task:
    """One tuning problem: a space on a node, how to evaluate it, and the model we believe."""

    space: KnobSpace
    node: Node
    evaluate: Callable[[Config], Measurement]
    belief: PipelineModel
    start: Config | None = None


def check_layout(space: KnobSpace) -> None:
    from core.errors import UserError

    n_cpu = len(space.cpu_knobs)
    n_other = len(space.knobs) - n_cpu
    if n_cpu > MAX_CPU or n_other > MAX_OTHER:
        raise UserError(
            f"InTune supports at most {MAX_CPU} cpu knobs and {MAX_OTHER} other knobs; "
            f"{space.name} has {n_cpu} and {n_other}"
        )


def apply_action(space: KnobSpace, config: Mapping[str, int], action: Action) -> Config | None:
    """The configuration an action leads to, or None if it leaves the space or the CPU budget."""
    cpu = space.cpu_knobs
    other = [k for k in space.knobs if k.kind != "cpu"]
    new = dict(config)
    kind = action[0]
    if kind == "stop":
        return new

    def step(knob, direction: int) -> bool:
        v = knob.step(int(new[knob.name]), direction)
        if v is None:
            return False
        new[knob.name] = v
        return True

    if kind in ("inc", "dec"):
        i = action[1]
        if i >= len(cpu) or not step(cpu[i], 1 if kind == "inc" else -1):
            return None
    elif kind == "move":
        i, j = action[1], action[2]
        if i >= len(cpu) or j >= len(cpu) or not step(cpu[i], -1) or not step(cpu[j], 1):
            return None
    else:
        m = action[1]
        if m >= len(other) or not step(other[m], 1 if kind == "up" else -1):
            return None
    return new if space.cpu_used(new) <= space.cpu_budget else None


def stage_capacities(model: PipelineModel, config: Mapping[str, int], node: Node) -> dict[str, float]:
    """Rows/s each stage's server could sustain in ``config`` according to the model."""
    group = servers(model, config)
    _, caps, _, _ = solve_servers(group, float(node.vcpus))
    return {model.stages[i].name: caps[gi] for gi, g in enumerate(group) for i in g.stages}


class Masker:
    """Computes action masks for a space, a node and a belief model."""

    def __init__(self, space: KnobSpace, node: Node, belief: PipelineModel, memory_margin: float = 0.85):
        self.space, self.node, self.belief, self.memory_margin = space, node, belief, memory_margin
        self.forbidden: set[tuple] = set()  # configurations seen to fail (out of memory, rejected)
        #: Measured over modelled memory above the model's base (what buffers and elements in
        #: flight hold), learnt from live measurements (:meth:`learn_memory`).
        self.memory_scale = 1.0
        #: Configurations that ran out of memory: one holding at least as much is masked too.
        self.memory_failed: list[dict[str, int]] = []
        #: A learnt predicate: True for a configuration expected to fail (the tuner's failure rules).
        self.predicts_failure: Callable[[Mapping[str, int]], bool] | None = None

    def safe(self, config: Mapping[str, int]) -> bool:
        if self.key(config) in self.forbidden:
            return False
        if self.predicts_failure is not None and self.predicts_failure(config):
            return False
        return self.memory_safe(config)

    def memory_safe(self, config: Mapping[str, int]) -> bool:
        """Whether memory allows ``config``: it holds less than every configuration that ran out
        of memory in some knob, and the memory model (scaled by what was measured) keeps it under
        ``memory_margin`` of the node's RAM budget."""
        if any(all(config[k] >= v for k, v in failed.items()) for failed in self.memory_failed):
            return False
        mem, _ = memory_mb(self.belief, config)
        base = self.belief.base_mb
        return base + (mem - base) * self.memory_scale <= self.memory_margin * self.node.ram_budget_mb

    def learn_memory(self, config: Mapping[str, int], peak_mb: float, *, failed: bool) -> None:
        """Learn from a measurement's peak memory (for a configuration that ran out of memory: the
        limit it hit). The part above the model's base is scaled so the model holds at least what
        was measured. A configuration that ran out of memory is also remembered: memory grows with
        every knob's value (threads, buffers, batch, cycle), so a configuration at least as large in
        every knob runs out too. That holds when the model has no memory per element at all (a
        calibration that could not size the elements), where a scale has nothing to act on."""
        if failed:
            self.memory_failed.append(dict(config))
        mem, _ = memory_mb(self.belief, config)
        variable = mem - self.belief.base_mb
        if variable > 1.0 and peak_mb > self.belief.base_mb:
            self.memory_scale = max(self.memory_scale, (peak_mb - self.belief.base_mb) / variable)

    @staticmethod
    def key(config: Mapping[str, int]) -> tuple:
        return tuple(sorted(config.items()))

    def targets(self, config: Mapping[str, int]) -> list[Config | None]:
        """For each action, the valid and safe configuration it leads to, else None."""
        out: list[Config | None] = []
        for a in ACTIONS:
            new = apply_action(self.space, config, a)
            if new is not None and a[0] != "stop" and not self.safe(new):
                new = None
            out.append(new)
        return out

    def mask(self, config: Mapping[str, int], exclude: Iterable[tuple] = ()) -> np.ndarray:
        excluded = set(exclude)
        cache_key = (self.key(config), len(self.forbidden), len(self.memory_failed), self.memory_scale,
                     frozenset(excluded))
        cached = getattr(self, "_cache", None)
        if cached is not None and cached[0] == cache_key:
            return cached[1].copy()
        m = np.zeros(N_ACTIONS, dtype=bool)
        for idx, new in enumerate(self.targets(config)):
            m[idx] = new is not None and (idx == STOP or self.key(new) not in excluded)
        m[STOP] = True
        self._cache = (cache_key, m.copy())
        return m


def observe(
    space: KnobSpace,
    node: Node,
    belief: PipelineModel,
    config: Mapping[str, int],
    measurement: Measurement,
    *,
    start_rows_per_s: float,
    best_rows_per_s: float,
    progress: float,
    improved: bool,
) -> np.ndarray:
    """The observation vector (see the module docstring)."""
    obs = np.zeros(OBS_DIM, dtype=np.float32)
    caps = stage_capacities(belief, config, node)
    stage_by_knob = {s.threads_knob: s.name for s in belief.stages if s.threads_knob}
    x = max(measurement.rows_per_s, 1e-9)
    for i, k in enumerate(space.cpu_knobs[:MAX_CPU]):
        v = int(config[k.name])
        cap = caps.get(stage_by_knob.get(k.name, ""), math.inf)
        base = i * CPU_FEATURES
        obs[base] = 1.0
        obs[base + 1] = v / space.cpu_budget
        obs[base + 2] = min(2.0, x / cap) if math.isfinite(cap) and cap > 0 else 0.0
        obs[base + 3] = float(k.step(v, 1) is not None)
        obs[base + 4] = float(k.step(v, -1) is not None)
    other = [k for k in space.knobs if k.kind != "cpu"]
    for m, k in enumerate(other[:MAX_OTHER]):
        base = MAX_CPU * CPU_FEATURES + m * OTHER_FEATURES
        obs[base] = 1.0
        obs[base + 1] = k.values.index(int(config[k.name])) / max(1, len(k.values) - 1)
        kind_slot = {"batch": 2, "buffer": 3}.get(k.kind, 4)
        obs[base + kind_slot] = 1.0
    g = MAX_CPU * CPU_FEATURES + MAX_OTHER * OTHER_FEATURES
    mem = measurement.peak_rss_mb or memory_mb(belief, config)[0]
    obs[g] = min(2.0, mem / node.ram_budget_mb)
    obs[g + 1] = space.cpu_used(config) / space.cpu_budget
    obs[g + 2] = math.log2(node.vcpus) / 7.0
    obs[g + 3] = float(np.clip(math.log(x / max(start_rows_per_s, 1e-9)) / 4.0, -2.0, 2.0))
    obs[g + 4] = min(1.5, x / max(best_rows_per_s, 1e-9))
    obs[g + 5] = min(1.0, progress)
    obs[g + 6] = float(improved)
    return obs


def perturbed(model: PipelineModel, rng: np.random.Generator, sigma: float) -> PipelineModel:
    """A copy of ``model`` with every cost and size off by a log-normal factor (a calibration error)."""
    from dataclasses import replace

    f = lambda: float(np.exp(rng.normal(0.0, sigma)))  # noqa: E731
    stages = tuple(
        replace(
            s,
            cpu_s_per_row=s.cpu_s_per_row * f(),
            cpu_s_per_call=s.cpu_s_per_call * f(),
            wait_s_per_row=s.wait_s_per_row * f(),
            bytes_per_row=s.bytes_per_row * f(),
        )
        for s in model.stages
    )
    return replace(model, stages=stages, source=f"{model.source}+perturbed")


def randomised(model: PipelineModel, rng: np.random.Generator, spread: float) -> PipelineModel:
    """A pipeline of ``model``'s shape with randomised stage costs (log-normal, ``spread``) and a
    random core contention (0 to 0.3): one draw of a *true* pipeline for training or a benchmark."""
    from dataclasses import replace

    return replace(perturbed(model, rng, spread), core_contention=float(rng.uniform(0.0, 0.3)), source="randomised")


def calibration_like(truth: PipelineModel, rng: np.random.Generator, sigma: float) -> PipelineModel:
    """What a calibration of ``truth`` may believe: every cost off by a log-normal factor
    (``sigma``), and none of what a short profile misses: no core contention, no effects of the
    knobs of kind ``other`` or ``buffer`` on stage costs."""
    from dataclasses import replace

    belief = perturbed(truth, rng, sigma)
    return replace(belief, core_contention=0.0, source="calibration-like",
                   stages=tuple(replace(st, cost_factors={}, cost_deltas={}) for st in belief.stages))


def random_task(rng: np.random.Generator, *, belief_sigma: float = 0.15, noise: float = 0.03) -> Task:
    """A random simulated tuning problem: pipeline kind, node size, calibration error, start point."""
    node = SIM_NODES[int(rng.choice(list(SIM_NODES)))]
    kind = PIPELINE_KINDS[int(rng.integers(len(PIPELINE_KINDS)))]
    truth = random_pipeline(rng, kind)
    space = dlrm_like_space(node)
    belief = perturbed(truth, rng, belief_sigma)
    eval_rng = np.random.default_rng(int(rng.integers(2**31)))
    return Task(space, node, lambda c: simulate(truth, c, node, noise=noise, rng=eval_rng), belief)


def random_start(space: KnobSpace, masker: Masker, rng: np.random.Generator) -> Config:
    """A random valid, memory-safe configuration (falls back to the space's initial one)."""
    for _ in range(50):
        config = {k.name: int(rng.choice(k.values)) for k in space.knobs}
        if space.is_valid(config) and masker.safe(config):
            return config
    return space.initial()


class StepInfo(TypedDict):
    """The env's ``info`` after a reset or a step: the configuration, its rows/s, the valid actions."""

    config: Config
    rows_per_s: float
    action_mask: np.ndarray
    oom: bool


class InTuneEnv(gym.Env):
    """Gymnasium env over :class:`Task` s drawn by ``task_sampler`` (random simulated ones by default)."""

    metadata = {"render_modes": []}

    def __init__(
        self,
        task_sampler: Callable[[np.random.Generator], Task] | None = None,
        *,
        horizon: int = 48,
        memory_soft: float = 0.7,
        memory_penalty: float = 0.5,
        oom_reward: float = -10.0,
        invalid_reward: float = -1.0,
        random_start_prob: float = 0.5,
    ):
        super().__init__()
        self.task_sampler = task_sampler or (lambda rng: random_task(rng))
        self.horizon = horizon
        self.memory_soft, self.memory_penalty = memory_soft, memory_penalty
        self.oom_reward, self.invalid_reward = oom_reward, invalid_reward
        self.random_start_prob = random_start_prob
        self.observation_space = gym.spaces.Box(low=-2.0, high=2.0, shape=(OBS_DIM,), dtype=np.float32)
        self.action_space = gym.spaces.Discrete(N_ACTIONS)
        self.task: Task | None = None

    # -- gymnasium API ------------------------------------------------------------------
    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None):  # gymnasium's signature
        super().reset(seed=seed)
        self.task = self.task_sampler(self.np_random)
        check_layout(self.task.space)
        self.masker = Masker(self.task.space, self.task.node, self.task.belief)
        if self.task.start is not None:
            self.config = dict(self.task.start)
        elif self.np_random.random() < self.random_start_prob:
            self.config = random_start(self.task.space, self.masker, self.np_random)
        else:
            self.config = self.task.space.initial()
        self.measurement = self.task.evaluate(self.config)
        self.start_x = max(self.measurement.rows_per_s, 1e-9)
        self.best_x = self.start_x
        self.t = 0
        self.improved = False
        return self._obs(), self._info()

    def step(self, action):
        assert self.task is not None, "call reset() first"
        action = int(action)
        self.t += 1
        truncated = self.t >= self.horizon
        if action == STOP:
            return self._obs(), 0.0, True, False, self._info()
        if not self.action_masks()[action]:
            return self._obs(), self.invalid_reward, False, truncated, self._info()
        new = apply_action(self.task.space, self.config, ACTIONS[action])
        assert new is not None
        m = self.task.evaluate(new)
        if m.failed:
            self.masker.forbidden.add(Masker.key(new))
            return self._obs(), self.oom_reward, True, False, self._info(oom=True)
        old_x = max(self.measurement.rows_per_s, 1e-9)
        x = max(m.rows_per_s, 1e-9)
        mem_fraction = m.peak_rss_mb / self.task.node.ram_budget_mb
        reward = math.log(x / old_x) - self.memory_penalty * max(0.0, mem_fraction - self.memory_soft)
        self.improved = x > old_x
        self.config, self.measurement = new, m
        self.best_x = max(self.best_x, x)
        return self._obs(), float(reward), False, truncated, self._info()

    # -- masking ------------------------------------------------------------------------
    def action_masks(self) -> np.ndarray:
        assert self.task is not None, "call reset() first"
        return self.masker.mask(self.config)

    # -- helpers ------------------------------------------------------------------------
    def _obs(self) -> np.ndarray:
        assert self.task is not None
        return observe(
            self.task.space,
            self.task.node,
            self.task.belief,
            self.config,
            self.measurement,
            start_rows_per_s=self.start_x,
            best_rows_per_s=self.best_x,
            progress=self.t / self.horizon,
            improved=self.improved,
        )

    def _info(self, oom: bool = False) -> StepInfo:
        return {
            "config": dict(self.config),
            "rows_per_s": self.measurement.rows_per_s,
            "action_mask": self.action_masks(),
            "oom": oom,
        }
