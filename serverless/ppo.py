"""PPO learner: clipped objective, GAE, value loss, entropy bonus, minibatch epochs.

CleanRL-style: every hyperparameter is a field of :class:`PPOConfig`; the update is
one readable function. Advantages are computed from the values the actors already
evaluated during the rollout (the numpy critic has the learner's exact weights), so
the learner does no extra forward pass over the batch before updating.

For the Seraph tuner, ``update(batch, probe_noise=True)`` also measures the gradient
noise scale's ingredients (McCandlish et al. 2018, arXiv 1812.06162): the squared
norm of the PPO-loss gradient on each minibatch of the first epoch's shuffle, and
of their mean, all at the current (pre-update) parameters.
"""

from __future__ import annotations

import logging
import math
import time
from dataclasses import asdict, dataclass, field, fields
from typing import TYPE_CHECKING, Any, TypedDict

import numpy as np

from core.json_edge import JsonObject
from serverless.network import NetworkSpec
from serverless.policy import PolicySpec

if TYPE_CHECKING:
    from torch import Tensor

log = logging.getLogger(__name__)


UPDATE_ENGINES = ("numpy", "torch")
#: the per-minibatch statistics of an update, in the order both engines compute them
STAT_NAMES = ("policy_loss", "value_loss", "entropy", "approx_kl", "clipfrac")


class LearnerState(TypedDict):
    """What a checkpoint keeps of the learner: torch's own state dicts, the counters, the RNG."""

    model: dict[str, Tensor]
    optimizer: dict[str, Any]  # torch's optimizer state dict, passed through as torch makes it
    env_steps_seen: int
    updates: int
    rng: JsonObject  # numpy's bit-generator state


class GradNoiseProbe(TypedDict):
    """Per-minibatch gradients' squared norms at one set of parameters (the noise scale's inputs)."""

    b_small: int
    small_sqnorms: list[float]
    b_big: int
    big_sqnorm: float


class UpdateStats(TypedDict, total=False):
    """One PPO update's statistics: the means of ``STAT_NAMES`` over its minibatches, then the
    update's own figures, and the gradient-noise probe when asked for one."""

    policy_loss: float
    value_loss: float
    entropy: float
    approx_kl: float
    clipfrac: float
    explained_variance: float | None
    learning_rate: float
    clip_coef: float
    minibatch_updates: int
    stopped_early: bool
    batch_size: int
    learner_s: float
    learner_cpu_s: float
    grad_noise: GradNoiseProbe


@dataclass
class PPOConfig:
    """All PPO hyperparameters."""

    learning_rate: float = 3e-4
    anneal_lr: bool = True  # linear decay to 0 over ``anneal_steps`` env steps
    anneal_steps: int | None = None  # the trainer sets it to max_steps when None
    gamma: float = 0.99
    gae_lambda: float = 0.95
    clip_coef: float = 0.2
    anneal_clip: bool = False  # linear decay of clip_coef alongside the learning rate
    clip_vloss: bool = False
    ent_coef: float = 0.0
    vf_coef: float = 0.5
    max_grad_norm: float = 0.5
    epochs: int = 10
    minibatch_size: int = 64
    norm_adv: bool = True
    target_kl: float | None = None
    # the actor's and the critic's widths and activation (serverless.network)
    network: NetworkSpec = NetworkSpec()
    adam_eps: float = 1e-5
    # torch intra-op threads for the learner; None leaves the process setting alone.
    # 1 by default: for a 64x64 MLP, threads cost more than they give.
    torch_threads: int | None = 1
    # What runs the minibatch steps. "numpy": a hand-written forward, backward and Adam
    # (serverless.numpy_update), several times faster for this model size; "torch": autograd
    # and torch's fused Adam. The same maths; the floats differ in rounding, so a seed's
    # trajectory is its own under each engine. A network the numpy engine does not support
    # (serverless.numpy_update.supports) runs on torch, with a note (choose_engine).
    update_engine: str = "numpy"
    # How a batch is split into env streams. 0: one env per actor function, stepped
    # batch/actors steps (so the actor count changes the rollout length and the number
    # of envs, and with them what is learned). N > 0: the batch is split over
    # max(actors, batch // N) env *slots* of about N steps each, dealt round-robin to the
    # functions; each slot has its own env and seeds, so for a given batch the training
    # is the same whatever the actor count (see serverless.slots.slot_plan).
    steps_per_env: int = 0

    def __post_init__(self) -> None:
        self.network = NetworkSpec.from_dict(self.network)
        if isinstance(self.steps_per_env, bool) or not isinstance(self.steps_per_env, int) or self.steps_per_env < 0:
            from core.errors import UserError

            raise UserError(f"steps_per_env must be a whole number >= 0 (0 = one env per actor), got {self.steps_per_env!r}")

    @property
    def hidden(self) -> tuple[int, ...]:
        """The network's hidden widths (``network.hidden``)."""
        return self.network.hidden

    def to_dict(self) -> JsonObject:
        data = asdict(self)
        data["network"] = self.network.to_dict()
        return data

    @classmethod
    def from_dict(cls, data: JsonObject) -> "PPOConfig":
        """From :meth:`to_dict`'s JSON; an older file's top-level ``hidden`` (and ``activation``)
        are read as the network."""
        data = dict(data)
        legacy = {k: data.pop(k) for k in ("hidden", "activation") if k in data}
        if legacy:
            from core.errors import UserError

            if "network" in data:
                raise UserError(f"PPO config: give the network once, as 'network', not also {sorted(legacy)}")
            data["network"] = legacy
        known = {f.name for f in fields(cls)}
        unknown = sorted(set(data) - known)
        if unknown:
            from core.errors import UserError

            raise UserError(f"unknown PPO hyperparameters {unknown}; known: {sorted(known)}")
        return cls(**data)

    def validate(self) -> None:
        from core.errors import UserError

        checks = [
            (self.learning_rate > 0, "learning_rate must be > 0"),
            (0 < self.gamma <= 1, "gamma must be in (0, 1]"),
            (0 <= self.gae_lambda <= 1, "gae_lambda must be in [0, 1]"),
            (self.clip_coef > 0, "clip_coef must be > 0"),
            (self.epochs >= 1, "epochs must be >= 1"),
            (self.minibatch_size >= 1, "minibatch_size must be >= 1"),
            (self.torch_threads is None or self.torch_threads >= 1, "torch_threads must be >= 1 or None"),
            (self.update_engine in UPDATE_ENGINES, f"update_engine must be one of {list(UPDATE_ENGINES)}, got {self.update_engine!r}"),
        ]
        for ok, message in checks:
            if not ok:
                raise UserError(f"PPO config: {message}")


@dataclass(frozen=True)
class LossForm:
    """Which PPO loss a gradient is taken of; both engines and the layout probe take one.

    The update's (:meth:`update`: the config's options at the iteration's clip range) or the
    layout probe's (:meth:`at_ratio_one`: the policy term with the advantages as given, no
    clipping, no bonus, the plain value term)."""

    clip: float
    norm_adv: bool
    clip_vloss: bool
    ent_coef: float
    vf_coef: float

    @classmethod
    def update(cls, config: PPOConfig, clip: float) -> "LossForm":
        return cls(clip, config.norm_adv, config.clip_vloss, config.ent_coef, config.vf_coef)

    @classmethod
    def at_ratio_one(cls, config: PPOConfig) -> "LossForm":
        """``mean(-A·ratio) + vf_coef·½·mean((V − R)²)``: at the pre-update parameters the
        ratio is 1 and no clip range binds (an infinite one)."""
        return cls(math.inf, False, False, 0.0, config.vf_coef)


def ppo_loss(model: Any, mb: dict[str, Tensor], form: LossForm) -> tuple[Any, Any]:
    """The PPO loss on one minibatch of torch tensors (the one definition: the torch engine
    backpropagates it, the numpy engine is its hand-written gradient, checked against it in the
    tests), and its statistics as one detached tensor in :data:`STAT_NAMES`' order (the
    entropy NaN when the bonus is off and it was not computed)."""
    import torch

    clip = form.clip
    logp, entropy, value = model.evaluate(mb["obs"], mb["actions"], with_entropy=bool(form.ent_coef))
    log_ratio = logp - mb["logprobs"]
    ratio = log_ratio.exp()
    adv = mb["advantages"]
    if form.norm_adv and adv.numel() > 1:
        adv = (adv - adv.mean()) / (adv.std() + 1e-8)
    pg_loss = torch.max(-adv * ratio, -adv * ratio.clamp(1 - clip, 1 + clip)).mean()
    if form.clip_vloss:
        v_clipped = mb["values"] + (value - mb["values"]).clamp(-clip, clip)
        v_loss = 0.5 * torch.max((value - mb["returns"]).pow(2), (v_clipped - mb["returns"]).pow(2)).mean()
    else:
        v_loss = 0.5 * (value - mb["returns"]).pow(2).mean()
    loss = pg_loss + form.vf_coef * v_loss
    if entropy is not None:
        ent = entropy.mean()
        loss = loss - form.ent_coef * ent
    with torch.no_grad():
        info = torch.stack(
            [
                pg_loss,
                v_loss,
                ent if entropy is not None else torch.tensor(float("nan")),
                ((ratio - 1) - log_ratio).mean(),
                ((ratio - 1.0).abs() > clip).float().mean(),
            ]
        )
    return loss, info


def choose_engine(config: PPOConfig) -> tuple[str, str | None]:
    """The engine that runs ``config``'s updates, and a one-line note when it is not the one
    asked for (a network the numpy engine does not support runs on torch)."""
    if config.update_engine != "numpy":
        return config.update_engine, None
    from serverless.numpy_update import supports

    reason = supports(config.network)
    if reason is None:
        return "numpy", None
    return "torch", f"update engine: torch instead of numpy for the {config.network.describe()} network ({reason})"


def compute_gae(
    rewards: np.ndarray,
    values: np.ndarray,
    terminated: np.ndarray,
    truncated: np.ndarray,
    trunc_values: np.ndarray,
    last_value: float,
    gamma: float,
    lam: float,
) -> tuple[np.ndarray, np.ndarray]:
    """Generalised advantage estimates and returns for one actor's segment.

    A terminated step bootstraps 0; a time-limit truncated step bootstraps
    ``trunc_values[t]`` (V of the final observation); the last step of the segment
    bootstraps ``last_value``. Neither a termination nor a truncation lets the
    advantage of the next episode leak back.
    """
    n = len(rewards)
    adv = np.zeros(n, dtype=np.float32)
    r = rewards.tolist()
    v = values.tolist()
    term = terminated.tolist()
    trunc = truncated.tolist()
    tv = trunc_values.tolist()
    gl = gamma * lam
    running = 0.0
    next_value = float(last_value)
    for t in range(n - 1, -1, -1):
        if term[t]:
            delta = r[t] - v[t]
            running = delta
        elif trunc[t]:
            delta = r[t] + gamma * tv[t] - v[t]
            running = delta
        else:
            delta = r[t] + gamma * next_value - v[t]
            running = delta + gl * running
        adv[t] = running
        next_value = v[t]
    return adv, adv + values.astype(np.float32)


def _minibatches(n: int, size: int, rng: np.random.Generator) -> list[np.ndarray]:
    """Shuffle ``range(n)`` into chunks of ``size``; a short tail under half a chunk joins the last."""
    perm = rng.permutation(n)
    size = min(size, n)
    chunks = [perm[i : i + size] for i in range(0, n, size)]
    if len(chunks) > 1 and len(chunks[-1]) < size / 2:
        tail = chunks.pop()
        chunks[-1] = np.concatenate([chunks[-1], tail])
    return chunks


def learner_arrays(arrays: dict[str, np.ndarray], action_kind: str) -> dict[str, np.ndarray]:
    """``arrays`` in the dtypes both update engines take: actions int64 (discrete) or float32,
    everything else float32 (no copy where the dtype already matches)."""
    act_dtype = np.int64 if action_kind == "discrete" else np.float32
    return {k: np.asarray(v, dtype=act_dtype if k == "actions" else np.float32) for k, v in arrays.items()}


def _as_tensors(arrays: dict[str, np.ndarray]) -> dict[str, Tensor]:
    """The same arrays as torch tensors, sharing their memory (slices are made contiguous)."""
    import torch

    return {k: torch.from_numpy(np.ascontiguousarray(v)) for k, v in arrays.items()}


@dataclass
class PPOLearner:
    """Owns the torch model and optimiser; ``update`` runs one PPO iteration.

    ``batch`` holds numpy arrays: ``obs``, ``actions``, ``logprobs``, ``values``,
    ``advantages``, ``returns`` (all of length N, the env steps of the iteration).
    """

    spec: PolicySpec
    config: PPOConfig = field(default_factory=PPOConfig)
    seed: int = 0

    def __post_init__(self) -> None:
        import torch

        from serverless.torch_policy import ActorCritic

        if self.config.torch_threads is not None:
            torch.set_num_threads(self.config.torch_threads)
        torch.manual_seed(self.seed)
        self.config.validate()
        self.spec = self.spec.with_network(self.config.network)
        self.model = ActorCritic(self.spec)
        self.optimizer = torch.optim.Adam(
            self.model.parameters(), lr=self.config.learning_rate, eps=self.config.adam_eps, fused=True
        )  # fused: one kernel for all parameters (tiny MLP: per-tensor overhead dominates)
        self.rng = np.random.default_rng(self.seed)
        self.env_steps_seen = 0
        self.updates = 0
        self.numpy_step = None
        #: the engine that runs the updates, and why it is not the one asked for (if it is not)
        self.engine, note = choose_engine(self.config)
        self.notes = [] if note is None else [note]
        if note is not None:
            log.warning(note)
        if self.engine == "numpy":
            from serverless.numpy_update import NumpyPPOStep

            self.numpy_step = NumpyPPOStep(self.model, self.optimizer, self.config)

    # ----------------------------------------------------------------- schedule
    def progress_fraction(self) -> float:
        """1.0 at the start, falling linearly to 0 at ``anneal_steps`` env steps."""
        horizon = self.config.anneal_steps
        if not horizon:
            return 1.0
        return max(0.0, 1.0 - self.env_steps_seen / horizon)

    # ----------------------------------------------------------------- loss
    def loss_gradient(self, mb: dict[str, np.ndarray], form: LossForm) -> Any:
        """The flat gradient of the loss ``form`` on ``mb`` at the current parameters (a torch
        tensor, in ``model.parameters()`` order), from the learner's engine; nothing updated."""
        import torch

        if self.numpy_step is not None:
            self.numpy_step.gradient(mb, form)
            return torch.from_numpy(self.numpy_step.grad.copy())
        params = list(self.model.parameters())
        loss, _ = ppo_loss(self.model, _as_tensors(mb), form)
        grads = torch.autograd.grad(loss, params, allow_unused=True)
        return torch.cat([(g if g is not None else torch.zeros_like(p)).reshape(-1) for g, p in zip(grads, params)])

    def _probe_grad_noise(self, data: dict[str, np.ndarray], chunks: list[np.ndarray], form: LossForm) -> GradNoiseProbe:
        """Per-minibatch PPO-loss gradients at the current parameters (no update)."""
        import torch

        size = min(self.config.minibatch_size, len(chunks[0]))
        full = [c[:size] for c in chunks if len(c) >= size]
        stacked = torch.stack([self.loss_gradient({k: v[idx] for k, v in data.items()}, form) for idx in full])
        small = stacked.pow(2).sum(1)
        big = stacked.mean(0).pow(2).sum()
        return {
            "b_small": int(size),
            "small_sqnorms": [float(x) for x in small],
            "b_big": int(size * len(full)),
            "big_sqnorm": float(big),
        }

    def _epoch_numpy(self, minibatches: list[dict[str, np.ndarray]], form: LossForm, lr: float) -> np.ndarray:
        """One epoch of numpy minibatch steps; the sums of their statistics."""
        step = self.numpy_step.step
        return np.sum([step(mb, form, lr) for mb in minibatches], axis=0)

    def _epoch_torch(self, minibatches: list[dict[str, np.ndarray]], form: LossForm) -> np.ndarray:
        """One epoch of torch (autograd, fused Adam) minibatch steps; the sums of their statistics."""
        import torch

        params = list(self.model.parameters())
        # Adam's step without the optimiser's profiling wrapper (a record_function and hook
        # lookups per call cost ~10% of an update this size); the same arithmetic, and
        # gradients dropped directly instead of through zero_grad's own record_function.
        step = getattr(self.optimizer.step, "__wrapped__", None)
        sums = torch.zeros(5)
        for mb in minibatches:
            loss, info = ppo_loss(self.model, _as_tensors(mb), form)
            for p in params:
                p.grad = None
            loss.backward()
            torch.nn.utils.clip_grad_norm_(params, self.config.max_grad_norm, foreach=True)
            if step is not None:
                step(self.optimizer)
            else:
                self.optimizer.step()
            sums += info
        return sums.numpy()

    def learner_threads(self) -> Any:
        """The numpy engine's BLAS held to the learner's threads (torch's own setting covers torch)."""
        import contextlib

        import torch

        if self.numpy_step is None:
            return contextlib.nullcontext()
        return self.numpy_step.blas_threads(self.config.torch_threads or torch.get_num_threads())

    def _epoch(self, epoch: int, data: dict[str, np.ndarray], form: LossForm, lr: float, probe_noise: bool,
               stats: UpdateStats) -> tuple[np.ndarray, int]:
        """One epoch over ``data`` in fresh minibatches: the sums of their statistics, and how many."""
        chunks = _minibatches(len(data["obs"]), self.config.minibatch_size, self.rng)
        if epoch == 0 and probe_noise:
            stats["grad_noise"] = self._probe_grad_noise(data, chunks, form)
        # shuffle once per epoch, then take contiguous slices (views, no copies)
        order = np.concatenate(chunks)
        shuffled = {k: v[order] for k, v in data.items()}
        bounds = np.cumsum([0, *map(len, chunks)])
        minibatches = [{k: v[a:b] for k, v in shuffled.items()} for a, b in zip(bounds[:-1], bounds[1:])]
        if self.numpy_step is not None:
            return self._epoch_numpy(minibatches, form, lr), len(chunks)
        return self._epoch_torch(minibatches, form), len(chunks)

    # ----------------------------------------------------------------- update
    def update(self, batch: dict[str, np.ndarray], probe_noise: bool = False) -> UpdateStats:
        """One PPO iteration on ``batch``; returns loss statistics (and grad_noise if probed)."""
        import torch

        t0 = time.perf_counter()
        c0 = time.thread_time()
        cfg = self.config
        frac = self.progress_fraction() if cfg.anneal_lr else 1.0
        lr = cfg.learning_rate * frac
        for group in self.optimizer.param_groups:
            group["lr"] = lr
        clip = cfg.clip_coef * (self.progress_fraction() if cfg.anneal_clip else 1.0)
        form = LossForm.update(cfg, max(clip, 1e-3))

        n = len(batch["obs"])
        keys = ("obs", "actions", "logprobs", "values", "advantages", "returns")
        data = learner_arrays({k: batch[k] for k in keys}, self.spec.action_kind)
        stats: UpdateStats = {}
        sums = np.zeros(5)
        count = 0
        stopped_early = False
        for epoch in range(cfg.epochs):
            with self.learner_threads():
                epoch_sums, minibatches = self._epoch(epoch, data, form, lr, probe_noise, stats)
            sums += epoch_sums
            count += minibatches
            if cfg.target_kl is not None and float(epoch_sums[3]) / minibatches > cfg.target_kl:
                stopped_early = True
                break
        means = (sums / max(count, 1)).tolist()
        for name, value in zip(STAT_NAMES, means):
            stats[name] = value
        if not cfg.ent_coef:  # not computed during the update: report it once, at the new parameters
            with torch.no_grad():
                tensors = _as_tensors(data)
                _, entropy, _ = self.model.evaluate(tensors["obs"], tensors["actions"], with_entropy=True)
            stats["entropy"] = float(entropy.mean())
        self.env_steps_seen += n
        self.updates += 1
        values = batch["values"]
        returns = batch["returns"]
        var_y = float(np.var(returns))
        stats.update(
            {
                "explained_variance": float("nan") if var_y == 0 else 1.0 - float(np.var(returns - values)) / var_y,
                "learning_rate": lr,
                "clip_coef": form.clip,
                "minibatch_updates": count,
                "stopped_early": stopped_early,
                "batch_size": n,
                "learner_s": time.perf_counter() - t0,
                # CPU time of this thread: the update's work, whatever else the machine runs
                "learner_cpu_s": time.thread_time() - c0,
            }
        )
        if math.isnan(stats["explained_variance"]):
            stats["explained_variance"] = None
        return stats

    # ----------------------------------------------------------------- checkpoints
    def state_dict(self) -> LearnerState:
        """Everything needed to continue: model, optimiser, counters, RNG state (as JSON-able)."""
        if self.numpy_step is not None:
            self.numpy_step.sync_optimizer_state()
        return {
            "model": self.model.state_dict(),
            "optimizer": self.optimizer.state_dict(),
            "env_steps_seen": self.env_steps_seen,
            "updates": self.updates,
            "rng": self.rng.bit_generator.state,
        }

    def load_state_dict(self, state: LearnerState) -> None:
        self.model.load_state_dict(state["model"])
        self.optimizer.load_state_dict(state["optimizer"])
        if self.numpy_step is not None:
            self.numpy_step.adopt_optimizer_state()
        self.env_steps_seen = int(state["env_steps_seen"])
        self.updates = int(state["updates"])
        self.rng.bit_generator.state = state["rng"]
