"""The numpy PPO step computes torch's update: the same gradients, the same Adam, to float32 rounding."""

from __future__ import annotations

import copy

import numpy as np
import pytest
import torch

from core.errors import UserError
from serverless.envs import inspect_env
from serverless.ppo import PPOConfig, PPOLearner

ENVS = ["CartPole-v1", "Acrobot-v1", "Pendulum-v1"]  # 2 and 3 discrete actions, a Gaussian policy


def _batch(spec, n: int = 700, seed: int = 0) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(seed)
    if spec.action_kind == "discrete":
        actions = rng.integers(0, spec.act_dim, n)
    else:
        actions = rng.standard_normal((n, spec.act_dim)).astype(np.float32)
    return {
        "obs": rng.standard_normal((n, spec.obs_dim)).astype(np.float32),
        "actions": actions,
        # old log-probabilities off the current ones, so that some ratios leave the clip range
        "logprobs": (rng.standard_normal(n) * 0.3 - 1.0).astype(np.float32),
        "values": rng.standard_normal(n).astype(np.float32),
        "advantages": rng.standard_normal(n).astype(np.float32),
        "returns": rng.standard_normal(n).astype(np.float32),
    }


def _pair(env_id: str, **config) -> tuple[PPOLearner, PPOLearner]:
    spec = inspect_env(env_id)
    make = lambda engine: PPOLearner(spec, PPOConfig(update_engine=engine, **config), seed=4)  # noqa: E731
    return make("numpy"), make("torch")


def _flat(learner: PPOLearner) -> torch.Tensor:
    return torch.cat([p.detach().reshape(-1) for p in learner.model.parameters()]).clone()


def _rel(a: torch.Tensor, b: torch.Tensor) -> float:
    return float((a - b).norm() / b.norm())


@pytest.mark.parametrize("env_id", ENVS)
@pytest.mark.parametrize("options", [{}, {"ent_coef": 0.01, "clip_vloss": True}, {"norm_adv": False, "vf_coef": 1.0}])
def test_minibatch_gradient_is_autograds(env_id: str, options: dict) -> None:
    fast, plain = _pair(env_id, **options)
    assert torch.equal(_flat(fast), _flat(plain))  # the same initial weights
    mb = {k: v[:64] for k, v in _batch(fast.spec).items()}
    g_fast, g_plain = fast._minibatch_gradient(mb, 0.2), plain._minibatch_gradient(mb, 0.2)
    assert _rel(g_fast, g_plain) < 1e-5
    # the clip range matters to the gradient: a narrow one moves it
    assert _rel(plain._minibatch_gradient(mb, 0.01), g_plain) > 1e-3


@pytest.mark.parametrize("env_id", ENVS)
def test_whole_updates_follow_torchs_and_report_the_same_statistics(env_id: str) -> None:
    fast, plain = _pair(env_id, epochs=3, ent_coef=0.01)
    start = _flat(fast)
    for k in range(3):
        batch = _batch(fast.spec, seed=k)
        s_fast, s_plain = fast.update(batch), plain.update(batch)
        for name in ("policy_loss", "value_loss", "entropy", "approx_kl", "clipfrac"):
            assert s_fast[name] == pytest.approx(s_plain[name], rel=1e-4, abs=1e-6), name
        assert s_fast["minibatch_updates"] == s_plain["minibatch_updates"]
    moved = _flat(plain) - start
    assert float(moved.norm()) > 0
    assert float((_flat(fast) - _flat(plain)).norm() / moved.norm()) < 1e-3  # rounding, against the whole move
    step_fast = fast.state_dict()["optimizer"]["state"][0]["step"]
    assert float(step_fast) == float(plain.optimizer.state_dict()["state"][0]["step"]) == 3 * s_plain["minibatch_updates"]


def test_gradient_norm_clipping_scales_to_the_limit() -> None:
    fast, _ = _pair("CartPole-v1", max_grad_norm=1e-3)
    mb = {k: v[:64] for k, v in _batch(fast.spec).items()}
    fast.numpy_step.gradient(mb, 0.2)
    assert float(np.linalg.norm(fast.numpy_step.grad)) > 1e-3
    fast.numpy_step._clip_grad_norm(1e-3)
    assert float(np.linalg.norm(fast.numpy_step.grad)) == pytest.approx(1e-3, rel=1e-3)


@pytest.mark.parametrize("engine", ["numpy", "torch"])
def test_a_resumed_learner_continues_exactly(engine: str) -> None:
    spec = inspect_env("Pendulum-v1")
    config = PPOConfig(update_engine=engine, epochs=2)
    original = PPOLearner(spec, config, seed=1)
    original.update(_batch(spec, seed=0))
    saved = copy.deepcopy(original.state_dict())  # as a checkpoint holds it: torch's load keeps same-dtype tensors
    resumed = PPOLearner(spec, PPOConfig(update_engine=engine, epochs=2), seed=99)
    resumed.load_state_dict(saved)
    original.update(_batch(spec, seed=1))
    resumed.update(_batch(spec, seed=1))
    assert torch.equal(_flat(original), _flat(resumed))


@pytest.mark.parametrize("saved_by, resumed_by", [("torch", "numpy"), ("numpy", "torch")])
def test_a_checkpoint_resumes_under_the_other_engine(saved_by: str, resumed_by: str) -> None:
    spec = inspect_env("CartPole-v1")
    writer = PPOLearner(spec, PPOConfig(update_engine=saved_by, epochs=2), seed=1)
    writer.update(_batch(spec, seed=0))
    reader = PPOLearner(spec, PPOConfig(update_engine=resumed_by, epochs=2), seed=7)
    reader.load_state_dict(copy.deepcopy(writer.state_dict()))
    step = reader.state_dict()["optimizer"]["state"][0]["step"]
    assert float(step) == float(writer.state_dict()["optimizer"]["state"][0]["step"]) > 0
    start = _flat(writer)
    writer.update(_batch(spec, seed=1))
    reader.update(_batch(spec, seed=1))
    assert float((_flat(reader) - _flat(writer)).norm() / (_flat(writer) - start).norm()) < 1e-3


def test_the_same_seed_gives_the_same_parameters() -> None:
    spec = inspect_env("Acrobot-v1")
    a, b = (PPOLearner(spec, PPOConfig(epochs=2), seed=5) for _ in range(2))
    for k in range(2):
        a.update(_batch(spec, seed=k))
        b.update(_batch(spec, seed=k))
    assert torch.equal(_flat(a), _flat(b))


def test_an_unknown_engine_is_named() -> None:
    with pytest.raises(UserError, match="update_engine must be one of \\['numpy', 'torch'\\]"):
        PPOConfig(update_engine="jax").validate()
