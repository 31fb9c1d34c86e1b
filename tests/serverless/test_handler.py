"""The rollout handler, in-process: event in, npz trajectories out, warm/cold state."""

from __future__ import annotations

import base64
import io
import sys
import types

import numpy as np
import pytest
import torch

from serverless import handler as handler_module
from serverless.envs import inspect_env
from serverless.policy import NumpyPolicy, decode_weights, encode_weights, export_numpy
from serverless.torch_policy import ActorCritic


def _event(spec, weights: bytes, actor_id: int = 0, steps: int = 64, seed: int = 7, env_id: str = "CartPole-v1") -> dict:
    return {
        "env_id": env_id,
        "num_steps": steps,
        "seed": seed,
        "policy_spec": spec.to_dict(),
        "actor_id": actor_id,
        "weights_npz_b64": base64.b64encode(weights).decode(),
    }


def _trajectories(result: dict) -> dict[str, np.ndarray]:
    with np.load(io.BytesIO(base64.b64decode(result["trajectories_npz_b64"])), allow_pickle=False) as data:
        return {k: data[k] for k in data.files}


@pytest.fixture(autouse=True)
def _cold() -> None:
    handler_module.reset_warm_state()


def test_round_trip_discrete() -> None:
    spec = inspect_env("CartPole-v1")
    torch.manual_seed(0)
    model = ActorCritic(spec)
    weights = encode_weights(export_numpy(model))
    result = handler_module.handler(_event(spec, weights, steps=300), None)
    tr = _trajectories(result)
    assert result["env_steps"] == 300 and result["cold_start"] is True
    assert tr["obs"].shape == (300, 4) and tr["obs"].dtype == np.float32
    assert tr["actions"].shape == (300,) and set(np.unique(tr["actions"])) <= {0, 1}
    assert set(result["timings"]) >= {"init_ms", "rollout_ms", "total_ms"}
    # a random CartPole policy ends episodes well within 300 steps: returns = lengths (reward 1/step)
    assert len(result["episode_returns"]) >= 2
    assert result["episode_returns"] == [float(n) for n in result["episode_lengths"]]
    assert int(tr["terminated"].sum() + tr["truncated"].sum()) == len(result["episode_returns"])
    # the actor's log-probs and values are the learner's, at the same weights
    with torch.no_grad():
        logp, _, value = model.evaluate(torch.from_numpy(tr["obs"]), torch.from_numpy(tr["actions"]))
    np.testing.assert_allclose(tr["logprobs"], logp.numpy(), atol=1e-5)
    np.testing.assert_allclose(tr["values"], value.numpy(), atol=1e-5)


def test_warm_invocation_continues_the_episode_and_reset_makes_it_cold() -> None:
    spec = inspect_env("CartPole-v1")
    weights = encode_weights(export_numpy(ActorCritic(spec)))
    first = handler_module.handler(_event(spec, weights, steps=5), None)
    second = handler_module.handler(_event(spec, weights, steps=5, seed=99), None)
    assert first["cold_start"] and not second["cold_start"]
    a, b = _trajectories(first), _trajectories(second)
    if not (a["terminated"][-1] or a["truncated"][-1]):
        # the warm env picks up where the last segment stopped: no reset in between
        assert not np.allclose(b["obs"][0], a["obs"][0])
        assert float(a["last_value"]) != 0.0  # a truncated segment is bootstrapped
    other = handler_module.handler(_event(spec, weights, actor_id=1, steps=5), None)
    assert other["cold_start"]  # a different actor is a different function instance
    handler_module.reset_warm_state()
    assert handler_module.handler(_event(spec, weights, steps=5), None)["cold_start"]


def test_same_seed_cold_invocations_are_reproducible() -> None:
    spec = inspect_env("CartPole-v1")
    weights = encode_weights(export_numpy(ActorCritic(spec)))
    a = _trajectories(handler_module.handler(_event(spec, weights, steps=50, seed=3), None))
    handler_module.reset_warm_state()
    b = _trajectories(handler_module.handler(_event(spec, weights, steps=50, seed=3), None))
    for key in a:
        np.testing.assert_array_equal(a[key], b[key])


def test_continuous_actions_round_trip() -> None:
    spec = inspect_env("Pendulum-v1")
    assert spec.action_kind == "continuous" and spec.act_dim == 1
    model = ActorCritic(spec)
    result = handler_module.handler(_event(spec, encode_weights(export_numpy(model)), steps=210, env_id="Pendulum-v1"), None)
    tr = _trajectories(result)
    assert tr["actions"].shape == (210, 1) and tr["actions"].dtype == np.float32
    # Pendulum's 200-step time limit truncates (never terminates): bootstrapped from V(final obs)
    assert tr["truncated"].sum() == 1 and tr["terminated"].sum() == 0
    assert tr["trunc_values"][tr["truncated"]][0] != 0.0
    with torch.no_grad():
        logp, _, _ = model.evaluate(torch.from_numpy(tr["obs"]), torch.from_numpy(tr["actions"]))
    np.testing.assert_allclose(tr["logprobs"], logp.numpy(), atol=1e-4)


def test_weights_from_s3_reference(monkeypatch: pytest.MonkeyPatch) -> None:
    spec = inspect_env("CartPole-v1")
    blob = encode_weights(export_numpy(ActorCritic(spec)))
    calls = []
    fake = types.ModuleType("serverless.s3_payload")
    fake.get_bytes = lambda bucket, key: calls.append((bucket, key)) or blob  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, "serverless.s3_payload", fake)
    import serverless

    monkeypatch.setattr(serverless, "s3_payload", fake, raising=False)
    event = _event(spec, blob)
    del event["weights_npz_b64"]
    event["weights_s3"] = {"bucket": "b", "key": "k/w.npz"}
    assert handler_module.handler(event, None)["env_steps"] == 64
    assert calls == [("b", "k/w.npz")]


def test_bad_events_are_errors() -> None:
    spec = inspect_env("CartPole-v1")
    weights = encode_weights(export_numpy(ActorCritic(spec)))
    event = _event(spec, weights)
    del event["env_id"]
    with pytest.raises(ValueError, match="env_id"):
        handler_module.handler(event, None)
    event = _event(spec, weights)
    del event["weights_npz_b64"]
    with pytest.raises(ValueError, match="weights"):
        handler_module.handler(event, None)


def test_weights_never_unpickle() -> None:
    buf = io.BytesIO()
    np.savez(buf, evil=np.array([object()], dtype=object))
    with pytest.raises(ValueError):
        decode_weights(buf.getvalue())


def test_numpy_policy_rejects_mismatched_weights() -> None:
    spec = inspect_env("CartPole-v1")
    arrays = export_numpy(ActorCritic(spec))
    with pytest.raises(ValueError, match="obs_dim"):
        NumpyPolicy(inspect_env("Acrobot-v1"), arrays)


def test_a_result_over_the_response_limit_moves_its_trajectories_to_s3(monkeypatch: pytest.MonkeyPatch) -> None:
    """Past Lambda's 6 MB response limit the handler hands its trajectories to S3 (via
    s3_payload, which sizes the result exactly); the stored bytes are the same npz."""
    from serverless import s3_payload

    stored: dict[tuple[str, str], bytes] = {}
    monkeypatch.setattr(s3_payload, "put_bytes", lambda bucket, key, data: stored.__setitem__((bucket, key), data))
    monkeypatch.setenv("TRAINWISE_ARTIFACTS_BUCKET", "tw-artifacts")
    monkeypatch.setattr(handler_module, "_OFFLOAD_CHECK_BYTES", 0)
    spec = inspect_env("CartPole-v1")
    weights = encode_weights(export_numpy(ActorCritic(spec)))
    event = _event(spec, weights, steps=64)

    inline = handler_module.handler(event, None)  # small: fits, so nothing moves
    assert "trajectories_npz_b64" in inline and not stored

    monkeypatch.setattr(s3_payload, "fits_inline", lambda obj, limit_bytes=0: False)
    handler_module.reset_warm_state()
    moved = handler_module.handler(event, None)
    assert "trajectories_npz_b64" not in moved
    ref = moved["trajectories_s3"]
    assert ref["bucket"] == "tw-artifacts" and (ref["bucket"], ref["key"]) in stored
    assert stored[(ref["bucket"], ref["key"])] == base64.b64decode(inline["trajectories_npz_b64"])
    handler_module.reset_warm_state()  # a learner's event names its run: the run's own folder
    ran = handler_module.handler({**event, "run_id": "0123abcd0123abcd"}, None)["trajectories_s3"]["key"]
    assert ran.startswith("rollouts/trajectories/0123abcd0123abcd/")
    handler_module.reset_warm_state()
    with pytest.raises(ValueError, match="run_id must be 8-32 lower-case hex digits"):
        handler_module.handler({**event, "run_id": "../../wheels"}, None)
