"""A small action-masked double DQN in torch, saved without pickle.

The Q-network is an MLP from the observation of :mod:`optimizers.intune.env` to one value per
action. Masking is applied to the action values everywhere they are used: acting (invalid actions
get ``-inf``), and the bootstrap target (the max runs over the next state's valid actions only),
so the agent never learns from, nor proposes, an invalid or over-budget configuration.

Saving: weights go to an ``.npz`` (plain arrays, loaded with ``allow_pickle=False``) and the
architecture plus training facts to a ``.json`` beside it; loading never unpickles.
"""

from __future__ import annotations

import json
import zipfile
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import TypedDict

import numpy as np
import torch
from torch import nn

from optimizers.intune.env import N_ACTIONS, OBS_DIM, OBS_VERSION
from core.errors import UserError


@dataclass
class DQNConfig:
    """Every hyperparameter in one place."""

    hidden: int = 128
    lr: float = 5e-4
    gamma: float = 0.95
    batch_size: int = 128
    buffer_size: int = 100_000
    target_sync: int = 500  # gradient steps between target-network copies
    eps_start: float = 1.0
    eps_end: float = 0.05
    eps_decay_steps: int = 30_000
    train_every: int = 2
    learning_starts: int = 1_000
    grad_clip: float = 10.0


def q_network(obs_dim: int, n_actions: int, hidden: int) -> nn.Module:
    return nn.Sequential(
        nn.Linear(obs_dim, hidden), nn.ReLU(), nn.Linear(hidden, hidden), nn.ReLU(), nn.Linear(hidden, n_actions)
    )


def masked_argmax(q: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    return q.masked_fill(~mask, -torch.inf).argmax(dim=-1)


class ReplayBuffer:
    def __init__(self, capacity: int, obs_dim: int, n_actions: int, seed: int = 0):
        self.capacity, self.size, self.pos = capacity, 0, 0
        self.obs = np.zeros((capacity, obs_dim), np.float32)
        self.next_obs = np.zeros((capacity, obs_dim), np.float32)
        self.actions = np.zeros(capacity, np.int64)
        self.rewards = np.zeros(capacity, np.float32)
        self.dones = np.zeros(capacity, np.float32)
        self.next_masks = np.zeros((capacity, n_actions), bool)
        self.rng = np.random.default_rng(seed)

    def add(self, obs, action, reward, next_obs, done, next_mask) -> None:
        i = self.pos
        self.obs[i], self.actions[i], self.rewards[i] = obs, action, reward
        self.next_obs[i], self.dones[i], self.next_masks[i] = next_obs, float(done), next_mask
        self.pos = (self.pos + 1) % self.capacity
        self.size = min(self.size + 1, self.capacity)

    def sample(self, n: int) -> tuple[torch.Tensor, ...]:
        idx = self.rng.integers(0, self.size, size=n)
        return (
            torch.from_numpy(self.obs[idx]),
            torch.from_numpy(self.actions[idx]),
            torch.from_numpy(self.rewards[idx]),
            torch.from_numpy(self.next_obs[idx]),
            torch.from_numpy(self.dones[idx]),
            torch.from_numpy(self.next_masks[idx]),
        )


class AgentInfo(TypedDict, total=False):
    """Where an agent came from (saved with it, shown in reports): its pre-training on the
    simulator (:mod:`optimizers.intune.pretrain`, :mod:`optimizers.intune.suite_pretrain`), where
    this run loaded it from, and the live steps it was fine-tuned on since."""

    trained_on: str
    target: str  # what the suite's agent learns: the residual over the model's predicted gain
    env_steps: int
    episodes: int
    mean_return_last_100: float | None
    model_error_first: float  # |residual| over the first and the last 2,000 moves (suite agent)
    model_error_last: float
    model_plus_agent_error_first: float  # |residual - Q| likewise
    model_plus_agent_error_last: float
    train_s: float
    seed: int
    source: str
    fine_tuned_live_steps: int


@dataclass
class MaskedDQN:
    """The agent: online and target networks, optimiser, replay buffer."""

    config: DQNConfig = field(default_factory=DQNConfig)
    seed: int = 0
    obs_dim: int = OBS_DIM
    n_actions: int = N_ACTIONS
    info: AgentInfo = field(default_factory=lambda: AgentInfo())

    def __post_init__(self) -> None:
        torch.manual_seed(self.seed)
        self.q = q_network(self.obs_dim, self.n_actions, self.config.hidden)
        self.target = q_network(self.obs_dim, self.n_actions, self.config.hidden)
        self.target.load_state_dict(self.q.state_dict())
        self.opt = torch.optim.Adam(self.q.parameters(), lr=self.config.lr)
        self.buffer = ReplayBuffer(self.config.buffer_size, self.obs_dim, self.n_actions, self.seed)
        self.rng = np.random.default_rng(self.seed)
        self.grad_steps = 0

    # -- acting ---------------------------------------------------------------------------
    def q_values(self, obs: np.ndarray) -> np.ndarray:
        with torch.no_grad():
            return self.q(torch.as_tensor(obs, dtype=torch.float32).unsqueeze(0)).squeeze(0).numpy()

    def act(self, obs: np.ndarray, mask: np.ndarray, epsilon: float = 0.0) -> int:
        """A valid action: random with probability ``epsilon``, else the best masked Q-value."""
        valid = np.flatnonzero(mask)
        if len(valid) == 0:
            raise ValueError("no valid action: the mask must always allow 'stop'")
        if self.rng.random() < epsilon:
            return int(self.rng.choice(valid))
        q = self.q_values(obs)
        q[~mask] = -np.inf
        return int(np.argmax(q))

    def ranked(self, obs: np.ndarray, mask: np.ndarray) -> list[int]:
        """Valid actions, best Q-value first."""
        q = self.q_values(obs)
        valid = np.flatnonzero(mask)
        return [int(a) for a in valid[np.argsort(-q[valid], kind="stable")]]

    def epsilon(self, step: int) -> float:
        c = self.config
        frac = min(1.0, step / max(1, c.eps_decay_steps))
        return c.eps_start + frac * (c.eps_end - c.eps_start)

    # -- learning -------------------------------------------------------------------------
    def remember(self, obs, action, reward, next_obs, done, next_mask) -> None:
        self.buffer.add(obs, action, reward, next_obs, done, next_mask)

    def learn(self, steps: int = 1, *, min_size: int | None = None) -> float:
        """Double-DQN updates with masked bootstrap targets; returns the last loss.

        ``min_size`` overrides how many transitions must be stored before learning starts
        (online fine-tuning learns from a few dozen live transitions).
        """
        loss_value = 0.0
        needed = min(self.config.batch_size, self.config.learning_starts) if min_size is None else min_size
        if self.buffer.size < max(1, needed):
            return loss_value
        batch = min(self.config.batch_size, self.buffer.size)
        for _ in range(steps):
            obs, actions, rewards, next_obs, dones, next_masks = self.buffer.sample(batch)
            with torch.no_grad():
                next_a = masked_argmax(self.q(next_obs), next_masks)
                next_q = self.target(next_obs).gather(1, next_a.unsqueeze(1)).squeeze(1)
                target = rewards + self.config.gamma * (1.0 - dones) * next_q
            q = self.q(obs).gather(1, actions.unsqueeze(1)).squeeze(1)
            loss = nn.functional.smooth_l1_loss(q, target)
            self.opt.zero_grad()
            loss.backward()
            nn.utils.clip_grad_norm_(self.q.parameters(), self.config.grad_clip)
            self.opt.step()
            self.grad_steps += 1
            if self.grad_steps % self.config.target_sync == 0:
                self.target.load_state_dict(self.q.state_dict())
            loss_value = float(loss.detach())
        return loss_value

    # -- persistence (no pickle) ----------------------------------------------------------
    def save(self, path: str | Path) -> tuple[Path, Path]:
        """Write ``<path>.npz`` (weights) and ``<path>.json`` (spec), each atomically
        (:mod:`core.atomic`); return both paths. A crash between the two leaves a pair that
        :meth:`load` refuses with a UserError, never a half-written file."""
        from core.atomic import write_text, write_with

        base = Path(path).with_suffix("")
        weights = {k: v.detach().cpu().numpy() for k, v in self.q.state_dict().items()}
        npz, spec = base.with_suffix(".npz"), base.with_suffix(".json")
        write_with(npz, lambda fh: np.savez(fh, **weights))
        write_text(
            spec,
            json.dumps(
                {
                    "format": "trainwise-intune-dqn",
                    "obs_version": OBS_VERSION,
                    "obs_dim": self.obs_dim,
                    "n_actions": self.n_actions,
                    "dqn": asdict(self.config),
                    "seed": self.seed,
                    "info": self.info,
                },
                indent=2,
            )
        )
        return npz, spec

    @classmethod
    def load(cls, path: str | Path) -> "MaskedDQN":
        """Load an agent saved by :meth:`save` (``.npz`` + ``.json``), without unpickling."""
        base = Path(path).with_suffix("")
        npz, spec_path = base.with_suffix(".npz"), base.with_suffix(".json")
        if not npz.exists() or not spec_path.exists():
            raise UserError(f"no saved InTune agent at {base} (need {npz.name} and {spec_path.name})")
        try:
            spec = json.loads(spec_path.read_text())
        except (OSError, ValueError) as exc:  # a truncated or damaged file (UnicodeDecodeError is a ValueError)
            raise UserError(f"{spec_path} is not readable as an InTune agent ({type(exc).__name__}: {exc})") from None
        if not isinstance(spec, dict) or spec.get("format") != "trainwise-intune-dqn" or spec.get("obs_version") != OBS_VERSION:
            raise UserError(
                f"{spec_path} is not an InTune agent of observation version {OBS_VERSION} "
                f"(format={spec.get('format')!r}, obs_version={spec.get('obs_version')!r})"
            )
        try:
            agent = cls(
                config=DQNConfig(**spec["dqn"]),
                seed=int(spec.get("seed", 0)),
                obs_dim=int(spec["obs_dim"]),
                n_actions=int(spec["n_actions"]),
                info=AgentInfo(**spec.get("info", {})),
            )
            with np.load(npz, allow_pickle=False) as data:
                state = {k: torch.from_numpy(np.array(data[k])) for k in data.files}
            agent.q.load_state_dict(state)
        except (OSError, ValueError, KeyError, TypeError, RuntimeError, zipfile.BadZipFile, EOFError) as exc:
            raise UserError(f"the InTune agent at {base} cannot be loaded ({type(exc).__name__}: {exc})") from None
        agent.target.load_state_dict(state)
        return agent
