"""The numpy PPO step computes torch's update: the same gradients, the same Adam, to float32 rounding,
at every network it declares it supports; any other network runs on torch, with a note."""

from __future__ import annotations

import copy

import numpy as np
import pytest
import torch

from core.errors import UserError
from serverless.envs import inspect_env
from serverless.network import ACTIVATIONS, NetworkSpec
from serverless.numpy_update import SUPPORTED_ACTIVATIONS, NumpyPPOStep, supports
from serverless.ppo import LossForm, PPOConfig, PPOLearner

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
    form = LossForm.update(fast.config, 0.2)
    g_fast, g_plain = fast.loss_gradient(mb, form), plain.loss_gradient(mb, form)
    assert _rel(g_fast, g_plain) < 1e-5
    # the clip range matters to the gradient: a narrow one moves it
    assert _rel(plain.loss_gradient(mb, LossForm.update(fast.config, 0.01)), g_plain) > 1e-3


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
    fast.numpy_step.gradient(mb, LossForm.update(fast.config, 0.2))
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


# --------------------------------------------------------------------------- other networks

NETWORKS = [(32,), (64, 64), (128, 64, 32)]
FORMS = {
    "update": lambda cfg: LossForm.update(cfg, 0.2),
    "update, bonus and clipped value": lambda cfg: LossForm(0.2, True, True, 0.01, cfg.vf_coef),
    "layout probe (ratio 1)": LossForm.at_ratio_one,
}


@pytest.mark.parametrize("activation", SUPPORTED_ACTIVATIONS)
@pytest.mark.parametrize("hidden", NETWORKS, ids=lambda h: "x".join(map(str, h)))
@pytest.mark.parametrize("env_id", ["Acrobot-v1", "Pendulum-v1"])  # 3 discrete actions; a Gaussian policy
def test_gradients_are_autograds_at_every_supported_network(env_id: str, hidden: tuple, activation: str) -> None:
    network = NetworkSpec(hidden, activation)
    assert supports(network) is None
    fast, plain = _pair(env_id, network=network)
    assert fast.engine == "numpy" and plain.engine == "torch" and fast.notes == []
    assert [tuple(w.shape[1:]) for w in fast.model.weights][:-1] == list(zip((fast.spec.obs_dim, *hidden), hidden))
    mb = {k: v[:96] for k, v in _batch(fast.spec, seed=len(hidden)).items()}
    for name, form_of in FORMS.items():
        form = form_of(fast.config)
        g_fast, g_plain = fast.loss_gradient(mb, form), plain.loss_gradient(mb, form)
        assert float(g_plain.norm()) > 0, name
        assert _rel(g_fast, g_plain) < 2e-5, name


@pytest.mark.parametrize("activation", SUPPORTED_ACTIVATIONS)
def test_a_whole_update_at_another_network_follows_torchs(activation: str) -> None:
    fast, plain = _pair("CartPole-v1", network=NetworkSpec((48, 24, 12), activation), epochs=2)
    start = _flat(fast)
    for k in range(2):
        s_fast, s_plain = fast.update(_batch(fast.spec, seed=k)), plain.update(_batch(fast.spec, seed=k))
        assert s_fast["policy_loss"] == pytest.approx(s_plain["policy_loss"], rel=1e-4, abs=1e-6)
        assert s_fast["value_loss"] == pytest.approx(s_plain["value_loss"], rel=1e-4, abs=1e-6)
    moved = _flat(plain) - start
    assert float(moved.norm()) > 0
    assert float((_flat(fast) - _flat(plain)).norm() / moved.norm()) < 1e-3


def test_the_activation_changes_the_gradient() -> None:
    """The engines do read the activation: the same weights under tanh and relu differ."""
    spec = inspect_env("CartPole-v1")
    grads = {}
    for activation in ("tanh", "relu"):
        learner = PPOLearner(spec, PPOConfig(network=NetworkSpec((32,), activation)), seed=4)
        mb = {k: v[:64] for k, v in _batch(learner.spec).items()}
        grads[activation] = learner.loss_gradient(mb, LossForm.update(learner.config, 0.2))
    assert _rel(grads["tanh"], grads["relu"]) > 1e-2


UNSUPPORTED = [name for name in ACTIVATIONS if name not in SUPPORTED_ACTIVATIONS]


def test_the_numpy_engine_declares_what_it_leaves_out() -> None:
    assert set(SUPPORTED_ACTIVATIONS) == {"tanh", "relu", "elu"}
    assert UNSUPPORTED == ["silu"]
    reason = supports(NetworkSpec((32,), "silu"))
    assert reason is not None and "silu" in reason and "tanh, relu, elu" in reason and "\n" not in reason


@pytest.mark.parametrize("activation", UNSUPPORTED)
def test_an_unsupported_network_runs_on_torch_with_a_note(activation: str, caplog: pytest.LogCaptureFixture) -> None:
    spec = inspect_env("Pendulum-v1")
    network = NetworkSpec((32, 16), activation)
    with caplog.at_level("WARNING", logger="serverless.ppo"):
        learner = PPOLearner(spec, PPOConfig(network=network, epochs=2), seed=4)
    assert learner.engine == "torch" and learner.numpy_step is None
    assert learner.config.update_engine == "numpy"  # what was asked stays recorded
    (note,) = learner.notes
    assert note.startswith("update engine: torch instead of numpy for the 32x16 silu network") and "\n" not in note
    assert [r.getMessage() for r in caplog.records] == [note]
    # it trains, on the right gradients (torch's own: the same as a learner that asked for torch)
    asked_torch = PPOLearner(spec, PPOConfig(network=network, epochs=2, update_engine="torch"), seed=4)
    assert asked_torch.notes == []
    batch = _batch(spec)
    learner.update(batch)
    asked_torch.update(batch)
    assert torch.equal(_flat(learner), _flat(asked_torch))


def test_the_numpy_step_refuses_a_model_it_does_not_compute() -> None:
    from serverless.torch_policy import ActorCritic

    spec = inspect_env("CartPole-v1").with_network(NetworkSpec((16,), "silu"))
    model = ActorCritic(spec)
    optimizer = torch.optim.Adam(model.parameters())
    with pytest.raises(ValueError, match="not silu"):
        NumpyPPOStep(model, optimizer, PPOConfig(network=spec.network))
    with pytest.raises(ValueError, match="computes serverless.torch_policy.ActorCritic, not Linear"):
        NumpyPPOStep(torch.nn.Linear(4, 2), optimizer, PPOConfig())
