"""What a run across a job's history trains at and records: each phase one RunShape, its layout set."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace

import pytest

from optimizers.seraph.arms import ladders
from optimizers.seraph.baseline import STATIC_DEFAULT_CONFIG
from optimizers.seraph.history import History, JobKey, Phase
from optimizers.seraph.job import SeraphJob
from optimizers.seraph.learning import _arm_spec, _phases, record_training
from optimizers.seraph.request import SeraphRequest
from serverless.ppo import PPOConfig
from serverless.run_shape import RunShape
from serverless.trainer import TrainSpec


def test_each_change_is_a_phase_and_keeps_the_layout_it_does_not_name() -> None:
    first = Phase(RunShape(2, 1769, 4000, 2000))
    changes = [
        {"iteration": 3, "env_steps": 12_000, "from": {}, "to": {"actors": 8, "memory_mb": 1769, "batch": 4000}},
        {"iteration": 5, "env_steps": 20_000, "from": {}, "to": {"actors": 8, "memory_mb": 1769, "batch": 4000,
                                                                  "steps_per_env": 500}},
    ]
    assert _phases(first, changes) == (
        first, Phase(RunShape(8, 1769, 4000, 2000), 12_000), Phase(RunShape(8, 1769, 4000, 500), 20_000),
    )


def test_an_arm_trains_at_its_point_with_its_layout_in_the_ppo_settings() -> None:
    job = SeraphJob.of(SeraphRequest(env_id="CartPole-v1", target_reward=100.0))
    (arm, *_), = ladders(job.baseline, "cost")
    spec = _arm_spec(job, arm)
    assert spec.run == arm.shape.without_layout() == RunShape(2, 1769, 2000)
    assert spec.ppo.steps_per_env == arm.shape.steps_per_env == 1000


def _result(**changes: object) -> SimpleNamespace:
    return SimpleNamespace(config_changes=[], reached=True, env_steps=4000, lambda_time_s=1.0, cost_usd=0.01,
                           ledger=SimpleNamespace(label="modelled"), curve=[], wall_s=1.0, **changes)


@pytest.mark.parametrize("run, ppo_steps_per_env, arm, first", [
    (RunShape(2, 1769, 4000), 0, "baseline", STATIC_DEFAULT_CONFIG),  # one env per function: the static default
    (RunShape(2, 1769, 4000), 2000, "baseline", STATIC_DEFAULT_CONFIG),
    (RunShape(2, 1769, 4000), 500, "fixed", RunShape(2, 1769, 4000, 500)),
    (RunShape(2, 1769, 4000, 1000), 0, "fixed", RunShape(2, 1769, 4000, 1000)),  # the run's own layout counts
])
def test_rl_train_records_the_shape_it_ran_at(run: RunShape, ppo_steps_per_env: int, arm: str, first: RunShape,
                                             tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TRAINWISE_HOME", str(tmp_path))
    spec = TrainSpec(env_id="CartPole-v1", target_reward=100.0, max_steps=4000, run=run,
                     ppo=PPOConfig(steps_per_env=ppo_steps_per_env))
    record_training(spec, _result(), source="test")
    key = JobKey.of("CartPole-v1", {}, 100.0, {**spec.ppo.to_dict(), "steps_per_env": 0}, 4000)
    (recorded,) = History(key).runs()
    assert recorded.arm == arm and recorded.phases == (Phase(first),)
