"""The batch-evidence and pipeline-estimate benchmarks: their arithmetic and their instruments."""

from __future__ import annotations

import copy
from types import SimpleNamespace

import numpy as np
import pytest

from benchmarks.seraph_pipeline_estimate import pipelined_seconds


def _rec(rollout_s: float, update_cpu_s: float, host_s: float, speed: float = 1.0) -> SimpleNamespace:
    return SimpleNamespace(lambda_s=rollout_s, learner_cpu_s=update_cpu_s, host_speed=speed, host_s=host_s)


def test_pipelined_timeline_overlaps_each_rollout_with_the_previous_update():
    # R = rollouts, U = updates, O = the host's other work (host_s - U)
    recs = [_rec(0.08, 0.05, 0.06), _rec(0.08, 0.05, 0.06), _rec(0.03, 0.05, 0.06)]
    # R0 + O0 + max(R1, U0) + O1 + max(R2, U1) + O2 + U2
    expected = 0.08 + 0.01 + 0.08 + 0.01 + 0.05 + 0.01 + 0.05
    assert pipelined_seconds(recs) == pytest.approx(expected)
    serial = sum(r.lambda_s + r.host_s for r in recs)
    assert pipelined_seconds(recs) < serial


def test_pipelined_timeline_of_one_iteration_is_the_serial_one():
    rec = _rec(0.08, 0.05, 0.06)
    assert pipelined_seconds([rec]) == pytest.approx(0.08 + 0.06)
    assert pipelined_seconds([]) == 0.0


def test_the_update_share_follows_the_host_clocks_speed_correction():
    # a slow host moment: 0.10 s of update CPU counted as 0.05 s on the clock
    recs = [_rec(0.02, 0.10, 0.06, speed=0.5), _rec(0.02, 0.10, 0.06, speed=0.5)]
    assert pipelined_seconds(recs) == pytest.approx(0.02 + 0.01 + 0.05 + 0.01 + 0.05)


def test_one_update_lag_sends_the_previous_iterations_policy(monkeypatch):
    from benchmarks import seraph_pipeline_estimate as bench
    from serverless import trainer

    sent = []
    monkeypatch.setattr(trainer, "rollout_events", lambda env, seed, it, learner, *a, **k: sent.append(learner.model.w))
    learner = SimpleNamespace(model=SimpleNamespace(w=0), spec="spec")
    with bench.one_update_lag():
        for it in range(4):
            learner.model.w = it  # the learner's weights after `it` updates
            trainer.rollout_events("E", 0, it, learner)
    assert sent == [0, 0, 1, 2]
    learner.model.w = 9  # the instrument is gone on exit: the learner's own weights again
    trainer.rollout_events("E", 0, 5, learner)
    assert sent[-1] == 9


def test_the_held_out_gain_leaves_the_learner_as_it_found_it():
    from benchmarks.seraph_batch_evidence import held_out_gain
    from serverless.envs import inspect_env
    from serverless.ppo import PPOConfig, PPOLearner

    spec = inspect_env("CartPole-v1")
    learner = PPOLearner(spec, PPOConfig(epochs=2, minibatch_size=32), seed=0)
    rng = np.random.default_rng(0)
    n = 256
    batch = {
        "obs": rng.normal(size=(n, 4)).astype(np.float32), "actions": rng.integers(0, 2, n).astype(np.int64),
        "logprobs": np.full(n, np.log(0.5), np.float32), "values": rng.normal(size=n).astype(np.float32),
        "advantages": rng.normal(size=n).astype(np.float32), "returns": rng.normal(size=n).astype(np.float32),
    }
    before = copy.deepcopy(learner.state_dict())
    row = held_out_gain(learner, PPOLearner.update, batch)
    assert np.isfinite(row["half_out"])
    after = learner.state_dict()
    for name, tensor in before["model"].items():
        assert np.array_equal(tensor.numpy(), after["model"][name].numpy()), name
    assert after["updates"] == before["updates"] and after["env_steps_seen"] == before["env_steps_seen"]
    assert after["rng"] == before["rng"]


def test_the_noise_to_signal_ratio_pools_the_probes_pairs():
    from benchmarks.seraph_batch_evidence import noise_to_signal

    def rec(pairs):
        return SimpleNamespace(layout_probe={"envs": 2, "layouts": [{"chunks": 2, "pairs": pairs}]})

    records = [rec([{"var_env": 0.1, "signal": 1.0}]), rec([{"var_env": 0.3, "signal": 3.0}]),
               SimpleNamespace(layout_probe=None)]
    assert noise_to_signal(records) == pytest.approx(0.4 / (2 * 4.0))
    assert noise_to_signal([rec([{"var_env": 0.1, "signal": -1.0}])]) is None  # no signal: no estimate
    assert noise_to_signal([]) is None
