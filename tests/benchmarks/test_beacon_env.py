"""The benchmarks' own user-module envs: Beacon (discrete) and BeaconContinuous (a Box action)."""

from __future__ import annotations

import gymnasium as gym
import numpy as np
import pytest
from gymnasium.utils.env_checker import check_env

import benchmarks.beacon_env  # noqa: F401  (registers the envs)


@pytest.mark.parametrize("env_id", ["Beacon-v0", "BeaconContinuous-v0"])
def test_the_envs_pass_gymnasiums_checker(env_id):
    check_env(gym.make(env_id).unwrapped)


def test_the_continuous_step_scales_the_move_and_is_clipped_to_its_bounds():
    env = gym.make("BeaconContinuous-v0").unwrapped
    assert isinstance(env.action_space, gym.spaces.Box) and env.action_space.shape == (1,)
    env.reset(seed=3)
    goal = env.goal
    obs, reward, terminated, truncated, _ = env.step(np.array([0.5], np.float32))
    assert env.x == pytest.approx(0.05) and reward == pytest.approx(-abs(goal - 0.05))
    env.step(np.array([-7.0], np.float32))  # clipped to -1: one full step back
    assert env.x == pytest.approx(-0.05) and obs[1] == pytest.approx(goal - 0.05)
    assert not terminated and not truncated


def test_the_discrete_beacon_moves_as_before_and_both_end_after_100_steps():
    for env_id, action in (("Beacon-v0", 2), ("BeaconContinuous-v0", np.array([1.0], np.float32))):
        env = gym.make(env_id).unwrapped
        env.reset(seed=0)
        for t in range(100):
            _, _, _, truncated, _ = env.step(action)
            assert truncated == (t == 99)
        assert env.x == pytest.approx(2.0)  # 100 steps right of 0.1, clipped at 2


def test_the_continuous_beacon_has_a_benchmark_target_and_no_references():
    from benchmarks.seraph import TARGETS, WITHOUT_REFERENCES

    env = "benchmarks.beacon_env:BeaconContinuous-v0"
    assert env in TARGETS and env in WITHOUT_REFERENCES
