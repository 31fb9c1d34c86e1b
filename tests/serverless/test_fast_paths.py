"""The runtime's fast paths compute exactly what the plain paths compute."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from serverless.envs import inspect_env
from serverless.policy import NumpyPolicy, export_numpy
from serverless.ppo import PPOConfig, PPOLearner
from serverless.torch_policy import ActorCritic


@pytest.mark.parametrize("env_id", ["CartPole-v1", "Pendulum-v1"])
def test_drawing_up_front_gives_the_same_actions_as_one_draw_per_step(env_id: str) -> None:
    spec = inspect_env(env_id)
    torch.manual_seed(0)
    policy = NumpyPolicy(spec, export_numpy(ActorCritic(spec)))
    obs = np.random.default_rng(1).standard_normal((300, spec.obs_dim)).astype(np.float32)
    rng = np.random.default_rng(5)
    one_by_one = [policy.act(o, rng) for o in obs]
    draws = policy.draws(np.random.default_rng(5), len(obs))
    up_front = [policy.act_drawn(o, d) for o, d in zip(obs, draws)]
    for (a1, l1, v1), (a2, l2, v2) in zip(one_by_one, up_front):
        assert np.array_equal(a1, a2) and l1 == l2 and v1 == v2


def _batch(spec, n: int = 512) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(0)
    return {
        "obs": rng.standard_normal((n, spec.obs_dim)).astype(np.float32),
        "actions": rng.integers(0, spec.act_dim, n),
        "logprobs": np.full(n, -0.7, np.float32),
        "values": rng.standard_normal(n).astype(np.float32),
        "advantages": rng.standard_normal(n).astype(np.float32),
        "returns": rng.standard_normal(n).astype(np.float32),
    }


def test_the_update_without_the_optimisers_wrapper_steps_exactly_as_with_it() -> None:
    spec = inspect_env("CartPole-v1")
    config = PPOConfig(epochs=3, minibatch_size=64, anneal_lr=False, update_engine="torch")
    fast, plain = PPOLearner(spec, config, seed=2), PPOLearner(spec, config, seed=2)
    wrapped = plain.optimizer.step
    plain.optimizer.step = lambda: wrapped()  # no __wrapped__: the update calls the public step()
    for _ in range(2):
        s_fast, s_plain = fast.update(_batch(spec)), plain.update(_batch(spec))
        assert s_fast["policy_loss"] == s_plain["policy_loss"]
    for a, b in zip(fast.model.parameters(), plain.model.parameters()):
        assert torch.equal(a, b)
    assert fast.optimizer.state_dict()["state"][0]["step"] == plain.optimizer.state_dict()["state"][0]["step"]


def test_inverse_cdf_is_numpys_searchsorted_over_the_float32_cumsum() -> None:
    from serverless.policy import _inverse_cdf

    rng = np.random.default_rng(0)
    for n in (2, 3, 4, 7):
        for _ in range(3000):
            p = np.exp(rng.standard_normal(n).astype(np.float32) * rng.choice([1.0, 30.0])).astype(np.float32)
            c = np.cumsum(p)
            # thresholds: random, exactly on a running sum, and past the total
            for t in (np.float32(rng.random()) * p.sum(), c[rng.integers(n)], c[-1] * np.float32(1.5)):
                assert _inverse_cdf(p.tolist(), t) == min(int(np.searchsorted(c, t)), n - 1)
