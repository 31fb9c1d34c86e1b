"""Which gymnasium envs the runtime can train, checked before any work starts.

Supported: any registered env id whose observation space is a 1-D ``Box`` and whose
action space is ``Discrete`` or a 1-D ``Box``. Anything else is a :class:`UserError`
that says what was found and what is allowed; an unknown id suggests close names.
"""

from __future__ import annotations

import difflib

import numpy as np

from serverless.policy import PolicySpec
from core.errors import UserError


def _registered_ids() -> list[str]:
    import gymnasium as gym

    return sorted(gym.envs.registry.keys())


def inspect_env(env_id: str, hidden: tuple[int, ...] = (64, 64)) -> PolicySpec:
    """Make ``env_id`` once, check its spaces and return the matching :class:`PolicySpec`."""
    import gymnasium as gym
    from gymnasium import spaces

    if not isinstance(env_id, str) or not env_id:
        raise UserError("env id must be a non-empty string such as CartPole-v1")
    ids = _registered_ids()
    if env_id not in ids:
        close = difflib.get_close_matches(env_id, ids, n=3, cutoff=0.5)
        hint = f"; did you mean {', '.join(close)}?" if close else "; e.g. CartPole-v1, Acrobot-v1, LunarLander-v3"
        raise UserError(f"unknown gymnasium env id {env_id!r} (not in gymnasium's registry){hint}")
    try:
        env = gym.make(env_id)
    except Exception as exc:  # missing optional dependency (box2d, mujoco...), bad kwargs
        raise UserError(f"env {env_id!r} is registered but cannot be created here: {exc}") from None
    try:
        obs_space, act_space = env.observation_space, env.action_space
    finally:
        env.close()
    if not isinstance(obs_space, spaces.Box) or len(obs_space.shape) != 1:
        raise UserError(
            f"env {env_id!r} has observation space {obs_space}; supported: a 1-D Box (flat vector observations)"
        )
    obs_dim = int(obs_space.shape[0])
    if isinstance(act_space, spaces.Discrete):
        if int(act_space.start) != 0:
            raise UserError(f"env {env_id!r} has Discrete action space starting at {act_space.start}; supported: start 0")
        return PolicySpec(obs_dim=obs_dim, action_kind="discrete", act_dim=int(act_space.n), hidden=hidden)
    if isinstance(act_space, spaces.Box) and len(act_space.shape) == 1:
        low = np.asarray(act_space.low, dtype=np.float64)
        high = np.asarray(act_space.high, dtype=np.float64)
        if not (np.all(np.isfinite(low)) and np.all(np.isfinite(high))):
            raise UserError(f"env {env_id!r} has an unbounded Box action space; supported: finite bounds")
        return PolicySpec(
            obs_dim=obs_dim,
            action_kind="continuous",
            act_dim=int(act_space.shape[0]),
            hidden=hidden,
            action_low=tuple(float(x) for x in low),
            action_high=tuple(float(x) for x in high),
        )
    raise UserError(
        f"env {env_id!r} has action space {act_space}; supported: Discrete or a 1-D Box (continuous)"
    )
