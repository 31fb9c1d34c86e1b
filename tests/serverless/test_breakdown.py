"""The per-iteration breakdown of wall time: phases that add up to the iteration."""

from __future__ import annotations

from pathlib import Path

import pytest

from serverless import handler as handler_module
from serverless.envs import inspect_env
from serverless.iteration_clock import PHASES, PhaseBreakdown, critical_lane, split_rollouts
from serverless.policy import encode_weights, export_numpy
from serverless.ppo import PPOConfig
from serverless.torch_policy import ActorCritic
from serverless.trainer import TrainSpec, train
from serverless.run_shape import RunShape
from tests.serverless.test_handler import _event
from tests.serverless.test_trainer import InProcessBackend


def _result(lane: int | None, total: float, rollout: float, env: float) -> dict:
    out = {"timings": {"total_ms": total, "rollout_ms": rollout, "env_ms": env}}
    return out if lane is None else out | {"lane": lane}


def test_the_critical_lane_sums_the_results_that_ran_one_after_another() -> None:
    results = [_result(0, 30, 20, 5), _result(1, 50, 40, 10), _result(0, 30, 25, 5)]
    assert critical_lane(results) == {"total_ms": 60, "rollout_ms": 45, "env_ms": 10}
    # without lanes (Lambda) every result is its own instance
    assert critical_lane([_result(None, 30, 20, 5), _result(None, 50, 40, 10)])["total_ms"] == 50


def test_split_rollouts_leaves_dispatch_as_the_remainder() -> None:
    split = split_rollouts(0.100, [_result(0, 60, 45, 10), _result(1, 20, 10, 5)])
    assert split["function_env_s"] == pytest.approx(0.010)
    assert split["function_policy_s"] == pytest.approx(0.035)
    assert split["function_other_s"] == pytest.approx(0.015)
    assert split["dispatch_s"] == pytest.approx(0.040)
    # handlers that read more than the call are scaled down to it: no negative dispatch
    squeezed = split_rollouts(0.030, [_result(0, 60, 45, 10)])
    assert squeezed["dispatch_s"] == pytest.approx(0.0)
    assert sum(squeezed.values()) == pytest.approx(0.030)


def test_with_checkpoint_adds_to_the_phase_and_the_iteration() -> None:
    b = PhaseBreakdown(1.0, tuple((name, 0.1) for name in PHASES)).with_checkpoint(0.5)
    d = b.to_dict()
    assert d["iteration_s"] == pytest.approx(1.5) and d["phases_s"]["checkpoint_s"] == pytest.approx(0.6)
    assert d["phases_s"]["other_s"] == pytest.approx(1.5 - 0.1 * len(PHASES) - 0.5)
    assert sum(d["shares"].values()) == pytest.approx(1.0)


def test_handler_reports_the_env_part_of_the_rollout() -> None:
    handler_module.reset_warm_state()
    spec = inspect_env("CartPole-v1")
    weights = encode_weights(export_numpy(ActorCritic(spec)))
    t = handler_module.handler(_event(spec, weights, steps=200), None)["timings"]
    assert 0 < t["env_ms"] < t["rollout_ms"] <= t["total_ms"]


def test_every_iterations_phases_add_up_to_its_wall_time(tmp_path: Path) -> None:
    handler_module.reset_warm_state()
    spec = TrainSpec(
        env_id="CartPole-v1", target_reward=1e9, max_steps=512, run=RunShape(actors=2, memory_mb=1769, batch=256),
        ppo=PPOConfig(epochs=2, minibatch_size=64), seed=3, checkpoint_every=1, checkpoint_dir=tmp_path / "ckpt",
    )
    result = train(spec, backend=InProcessBackend(), progress=False)
    summed: dict[str, float] = {}
    for record in result.iterations:
        d = record.to_dict()["breakdown"]
        phases = d["phases_s"]
        assert set(phases) == {*PHASES, "other_s"}
        assert sum(phases.values()) == pytest.approx(d["iteration_s"])
        assert d["iteration_s"] == pytest.approx(record.wall_s + phases["checkpoint_s"])
        assert all(s >= -1e-9 for s in phases.values()), phases  # the phases never overlap
        assert phases["update_s"] > 0 and phases["function_env_s"] > 0 and phases["function_policy_s"] > 0
        assert phases["checkpoint_s"] > 0  # checkpoint_every=1
        for name, s in phases.items():
            summed[name] = summed.get(name, 0.0) + s
    by_phase = result.to_dict()["ledger"]["time_by_phase"]["seconds"]
    # the ledger also holds the checkpoint written before the first iteration
    assert by_phase["update_s"] == pytest.approx(summed["update_s"])
    assert by_phase["checkpoint_s"] > summed["checkpoint_s"]
