"""The policy network defined once: NetworkSpec, its JSON in PPOConfig and PolicySpec, and the
actors' numpy policy and the learner's torch model computing the same network at every activation."""

from __future__ import annotations

import base64
import io
import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import torch

from core.errors import UserError
from serverless import handler as handler_module
from serverless.envs import inspect_env
from serverless.network import ACTIVATIONS, NetworkSpec
from serverless.policy import PolicySpec, encode_weights, export_numpy
from serverless.ppo import PPOConfig
from serverless.presets import preset_for
from serverless.torch_policy import ActorCritic
from serverless.run_shape import RunShape


def test_the_default_network_is_64x64_tanh() -> None:
    assert NetworkSpec() == PPOConfig().network == PolicySpec(4, "discrete", 2).network
    assert NetworkSpec().describe() == "64x64 tanh"
    assert preset_for("CartPole-v1").ppo.network == NetworkSpec()


@pytest.mark.parametrize(
    "hidden, activation, match",
    [
        ((), "tanh", "hidden must be one or more whole widths"),
        ((64, 0), "tanh", "hidden must be one or more whole widths"),
        ("64,64", "tanh", "hidden must be one or more whole widths"),
        ((64.5,), "tanh", "hidden must be one or more whole widths"),
        ((True,), "tanh", "hidden must be one or more whole widths"),
        ((64,), "sigmoid", r"activation must be one of \['tanh', 'relu', 'elu', 'silu'\], got 'sigmoid'"),
    ],
)
def test_a_bad_network_is_named_in_one_line(hidden, activation: str, match: str) -> None:
    with pytest.raises(UserError, match=match) as err:
        NetworkSpec(hidden, activation)
    assert "\n" not in str(err.value)


def test_ppo_config_json_round_trip_carries_the_network() -> None:
    config = PPOConfig(network=NetworkSpec((128, 64), "relu"), epochs=3)
    data = json.loads(json.dumps(config.to_dict()))
    assert data["network"] == {"hidden": [128, 64], "activation": "relu"} and "hidden" not in data
    again = PPOConfig.from_dict(data)
    assert again == config and again.network == NetworkSpec((128, 64), "relu") and again.hidden == (128, 64)


def test_an_older_ppo_config_with_top_level_hidden_still_reads() -> None:
    """Profiles and result files written before the network had its own spec."""
    old = {k: v for k, v in PPOConfig().to_dict().items() if k != "network"} | {"hidden": [32, 32]}
    assert PPOConfig.from_dict(old).network == NetworkSpec((32, 32), "tanh")
    with pytest.raises(UserError, match="give the network once"):
        PPOConfig.from_dict({**PPOConfig().to_dict(), "hidden": [32]})
    with pytest.raises(UserError, match="network must be a mapping"):
        PPOConfig.from_dict({"network": {"hidden": [32], "depth": 3}})


def test_policy_spec_json_carries_the_activation_and_an_older_event_means_tanh() -> None:
    spec = PolicySpec(4, "discrete", 2, network=NetworkSpec((16,), "elu"))
    data = spec.to_dict()
    assert data["hidden"] == [16] and data["activation"] == "elu"
    assert PolicySpec.from_dict(json.loads(json.dumps(data))) == spec
    older = {k: v for k, v in data.items() if k != "activation"}
    assert PolicySpec.from_dict(older).network == NetworkSpec((16,), "tanh")


@pytest.mark.parametrize("activation", list(ACTIVATIONS))
@pytest.mark.parametrize("env_id", ["CartPole-v1", "Pendulum-v1"])
def test_the_actors_policy_is_the_learners_network(env_id: str, activation: str) -> None:
    """A rollout at (48, 24) and each activation scores its actions as the torch model does."""
    spec = inspect_env(env_id).with_network(NetworkSpec((48, 24), activation))
    torch.manual_seed(1)
    model = ActorCritic(spec)
    with torch.no_grad():  # biases off zero, so that the activation's negative side is used
        for b in model.biases:
            b.normal_(0.0, 0.5)
    handler_module.reset_warm_state()
    event = {"env_id": env_id, "num_steps": 40, "seed": 5, "policy_spec": spec.to_dict(), "actor_id": 0,
             "weights_npz_b64": base64.b64encode(encode_weights(export_numpy(model))).decode()}
    result = handler_module.handler(event, None)
    with np.load(io.BytesIO(base64.b64decode(result["trajectories_npz_b64"])), allow_pickle=False) as data:
        tr = {k: data[k] for k in data.files}
    with torch.no_grad():
        logp, _, value = model.evaluate(torch.from_numpy(tr["obs"]), torch.from_numpy(tr["actions"]))
    np.testing.assert_allclose(tr["logprobs"], logp.numpy(), atol=1e-4)
    np.testing.assert_allclose(tr["values"], value.numpy(), atol=1e-4)
    handler_module.reset_warm_state()


def test_the_activations_differ_where_they_should() -> None:
    z = np.array([-2.0, -0.5, 0.0, 0.5, 2.0], dtype=np.float32)
    for name, act in ACTIVATIONS.items():
        expected = act.torch()(torch.from_numpy(z)).numpy()
        np.testing.assert_allclose(act.numpy(z.copy()), expected, rtol=1e-6, atol=1e-7, err_msg=name)
        if act.grad_from_output is not None:  # the derivative, from the output, is autograd's
            x = torch.from_numpy(z[z != 0]).requires_grad_()
            act.torch()(x).sum().backward()
            grad = np.asarray(act.grad_from_output(act.numpy(z[z != 0].copy())), dtype=np.float32)
            np.testing.assert_allclose(grad, x.grad.numpy(), rtol=1e-6, err_msg=name)


@pytest.mark.parametrize(
    "flags, match",
    [
        (["--hidden", "64,x"], "--hidden must be comma-separated whole widths >= 1 (e.g. 128,64), got '64,x'"),
        (["--hidden", "64,0"], "--hidden must be comma-separated whole widths >= 1"),
        (["--activation", "sigmoid"], "--activation must be one of tanh, relu, elu, silu, got 'sigmoid'"),
    ],
)
def test_rl_train_refuses_a_bad_network_in_one_line(tmp_path: Path, flags: list[str], match: str) -> None:
    out = tmp_path / "r.json"
    proc = subprocess.run(
        [sys.executable, "-m", "trainwise", "rl", "train", "--env", "CartPole-v1", "--target-reward", "475", *flags,
         "--json-out", str(out)],
        capture_output=True, text=True, timeout=120,
    )
    assert proc.returncode == 2 and "Traceback" not in proc.stderr
    assert match in proc.stderr and len(proc.stderr.strip().splitlines()) == 1
    assert not out.exists()


def test_rl_train_takes_the_network_as_flags_over_the_preset() -> None:
    from trainwise.cli import build_parser
    from trainwise.cli.rl import build_train_spec

    base = ["rl", "train", "--env", "CartPole-v1", "--target-reward", "475"]
    args = build_parser().parse_args([*base, "--hidden", "128,64", "--activation", "relu"])
    spec = build_train_spec(args)
    assert spec.ppo.network == NetworkSpec((128, 64), "relu")
    assert spec.ppo.learning_rate == preset_for("CartPole-v1").ppo.learning_rate  # the rest of the preset kept
    only_act = build_train_spec(build_parser().parse_args([*base, "--activation", "elu"]))
    assert only_act.ppo.network == NetworkSpec((64, 64), "elu")
    assert build_train_spec(build_parser().parse_args(base)).ppo.network == NetworkSpec()


def test_a_run_on_a_network_the_numpy_engine_leaves_out_notes_it(tmp_path: Path) -> None:
    from serverless.trainer import TrainSpec, train
    from tests.serverless.test_trainer import InProcessBackend

    spec = TrainSpec(env_id="CartPole-v1", target_reward=1e9, max_steps=512, run=RunShape(actors=2, memory_mb=1769, batch=256),
                     ppo=PPOConfig(epochs=2, network=NetworkSpec((32,), "silu")), checkpoint_every=0,
                     checkpoint_dir=tmp_path / "ckpt")
    result = train(spec, backend=InProcessBackend(), progress=False).to_dict()
    assert result["env_steps"] == 512
    engine_notes = [n for n in result["notes"] if n.startswith("update engine:")]
    assert engine_notes == ["update engine: torch instead of numpy for the 32 silu network (the numpy engine's backward "
                            "takes the activation's derivative from its output: tanh, relu, elu, not silu)"]
    assert result["config"]["ppo"]["network"] == {"hidden": [32], "activation": "silu"}
    assert result["config"]["policy_spec"]["activation"] == "silu"


@pytest.mark.slow
def test_another_network_trains_cartpole_to_475_under_rl_train(tmp_path: Path) -> None:
    """128x64 ReLU (not the default 64x64 tanh) on the numpy engine, which supports it, through
    ``trainwise rl train``'s own code path: the CartPole preset, seed 0, the local backend."""
    from trainwise.cli import main

    out = tmp_path / "run.json"
    rc = main(["rl", "train", "--env", "CartPole-v1", "--target-reward", "475", "--hidden", "128,64", "--activation", "relu",
               "--no-progress", "--checkpoint-every", "0", "--json-out", str(out)])
    assert rc == 0
    result = json.loads(out.read_text())
    assert result["reached"] is True and result["final_mean_return"] >= 475
    assert result["config"]["ppo"]["network"] == {"hidden": [128, 64], "activation": "relu"}
    assert result["config"]["policy_spec"]["hidden"] == [128, 64] and result["config"]["policy_spec"]["activation"] == "relu"
    # the numpy engine ran it: asked for (the default) and no note that torch stood in
    assert result["config"]["ppo"]["update_engine"] == "numpy"
    assert not [n for n in result["notes"] if n.startswith("update engine:")]
