"""The gymnasium env: check_env, and masking never exposes an invalid action."""

from __future__ import annotations

import warnings

import numpy as np
import pytest
from gymnasium.utils.env_checker import check_env

from ingestion.simulator import SIM_NODES, dlrm_like_space, random_pipeline, simulate
from optimizers.intune.env import ACTIONS, STOP, InTuneEnv, Masker, Task, apply_action, random_task


def test_env_passes_check_env():
    """Gymnasium's checker raises on a broken API and warns on a doubtful one: both fail here."""
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        check_env(InTuneEnv(), skip_render_check=True)


def _assert_mask_sound(env: InTuneEnv) -> None:
    mask = env.action_masks()
    assert mask[STOP]
    task = env.task
    for idx, allowed in enumerate(mask):
        if not allowed or idx == STOP:
            continue
        new = apply_action(task.space, env.config, ACTIONS[idx])
        assert new is not None, ACTIONS[idx]
        assert task.space.is_valid(new), (ACTIONS[idx], new)
        assert env.masker.safe(new)
        # the true pipeline never runs out of memory where the mask allows a step
        # (the belief's margin covers the calibration error used in these tasks)


def test_masking_never_exposes_an_invalid_action_over_random_states():
    rng = np.random.default_rng(0)
    env = InTuneEnv(random_start_prob=1.0)
    for episode in range(12):
        env.reset(seed=int(rng.integers(1 << 30)))
        for _ in range(15):
            _assert_mask_sound(env)
            mask = env.action_masks()
            a = int(rng.choice(np.flatnonzero(mask)))
            _, reward, terminated, truncated, info = env.step(a)
            assert not info["oom"]
            if terminated or truncated:
                break


def test_masked_out_actions_are_exactly_the_invalid_or_unsafe_ones():
    rng = np.random.default_rng(1)
    for _ in range(40):
        task = random_task(rng)
        masker = Masker(task.space, task.node, task.belief)
        config = {k.name: int(rng.choice(k.values)) for k in task.space.knobs}
        if not task.space.is_valid(config):
            continue
        mask = masker.mask(config)
        for idx, allowed in enumerate(mask):
            if idx == STOP:
                continue
            new = apply_action(task.space, config, ACTIONS[idx])
            expected = new is not None and task.space.is_valid(new) and masker.safe(new)
            assert bool(allowed) == expected


def test_oom_configuration_is_never_allowed_when_memory_is_tight():
    node = SIM_NODES[8]
    space = dlrm_like_space(node)
    truth = random_pipeline(np.random.default_rng(3), "transform")
    task = Task(space, node, lambda c: simulate(truth, c, node), truth)
    env = InTuneEnv(lambda rng: task, random_start_prob=0.0)
    env.reset(seed=0)
    masker = env.masker
    for config in list(space.grid())[::7]:
        for idx, allowed in enumerate(masker.mask(config)):
            if allowed and idx != STOP:
                new = apply_action(space, config, ACTIONS[idx])
                assert not simulate(truth, new, node).failed


def test_invalid_action_is_a_penalised_no_op():
    env = InTuneEnv(random_start_prob=0.0)
    env.reset(seed=3)
    mask = env.action_masks()
    invalid = int(np.flatnonzero(~mask)[0])
    before = dict(env.config)
    _, reward, terminated, _, _ = env.step(invalid)
    assert env.config == before and reward == env.invalid_reward and not terminated


def test_reward_telescopes_to_log_gain():
    env = InTuneEnv(lambda rng: random_task(rng, noise=0.0), random_start_prob=0.0, memory_penalty=0.0)
    env.reset(seed=5)
    x0 = env.measurement.rows_per_s
    total = 0.0
    rng = np.random.default_rng(0)
    for _ in range(10):
        mask = env.action_masks()
        mask[STOP] = False
        if not mask.any():
            break
        _, r, term, trunc, _ = env.step(int(rng.choice(np.flatnonzero(mask))))
        total += r
    assert total == pytest.approx(np.log(env.measurement.rows_per_s / x0), rel=1e-6, abs=1e-9)
