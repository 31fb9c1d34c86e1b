"""A user's own envs for the benchmarks, named as ``benchmarks.beacon_env:Beacon-v0`` and
``benchmarks.beacon_env:BeaconContinuous-v0``.

The Beacon env of the own-job acceptance check: steer a point toward a beacon on a line;
the reward is minus the distance, 100 steps an episode. ``Beacon-v0`` moves left, stays or
moves right (discrete actions); ``BeaconContinuous-v0`` takes a step in [-1, 1] that scales
the move (continuous actions). Neither has reference runs.
"""

from __future__ import annotations

import gymnasium as gym
import numpy as np
from gymnasium import spaces


class Beacon(gym.Env):
    """Steer a point toward a beacon on a line; reward is minus the distance, 100 steps."""

    def __init__(self, speed: float = 0.1) -> None:
        self.speed = speed
        self.observation_space = spaces.Box(-2.0, 2.0, (2,), np.float32)
        self.action_space = spaces.Discrete(3)

    def reset(self, *, seed: int | None = None, options: dict | None = None) -> tuple[np.ndarray, dict]:
        super().reset(seed=seed)
        self.x, self.goal, self.t = 0.0, float(self.np_random.uniform(-1, 1)), 0
        return self._obs(), {}

    def _obs(self) -> np.ndarray:
        return np.array([self.x, self.goal - self.x], np.float32)

    def _move(self, delta: float) -> tuple[np.ndarray, float, bool, bool, dict]:
        self.t += 1
        self.x = float(np.clip(self.x + delta * self.speed, -2, 2))
        return self._obs(), -abs(self.goal - self.x), False, self.t >= 100, {}

    def step(self, a: int) -> tuple[np.ndarray, float, bool, bool, dict]:
        return self._move(int(a) - 1)


class BeaconContinuous(Beacon):
    """Beacon with a continuous action: a step in [-1, 1] (clipped) scales the move."""

    def __init__(self, speed: float = 0.1) -> None:
        super().__init__(speed)
        self.action_space = spaces.Box(-1.0, 1.0, (1,), np.float32)

    def step(self, a: np.ndarray) -> tuple[np.ndarray, float, bool, bool, dict]:
        return self._move(float(np.clip(np.asarray(a, np.float64).reshape(-1)[0], -1.0, 1.0)))


gym.register("Beacon-v0", entry_point="benchmarks.beacon_env:Beacon")
gym.register("BeaconContinuous-v0", entry_point="benchmarks.beacon_env:BeaconContinuous")
