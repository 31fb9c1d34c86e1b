"""``SeraphJob.of`` decides as it did before it read each file once: the layout, the workload,
the pilot and the reference point of each built-in env (and a user env), with references
read, ignored (``references_ignored``) or ``TRAINWISE_IGNORE_REFERENCES=1``, at the chosen
layout and at a fixed one. The expected values were taken from the code that looked the
preset up three times and read the reference files five times."""

from __future__ import annotations

import contextlib

import pytest

from optimizers.seraph.job import SeraphJob
from optimizers.seraph.objectives import OBJECTIVES
from optimizers.seraph.pilot import workload_for
from optimizers.seraph.references import IGNORE_ENV, references_ignored
from optimizers.seraph.request import SeraphRequest
from optimizers.seraph.workload_profile import profile_key

# (references, env, --steps-per-env, layout (batch, steps per env, at baseline), its reason,
#  workload (steps per env, batches, step cap), its key on a fixed machine, pilot's fewest
#  functions, reference points, reference source up to its first comma)
CASES = [
    ('plain', 'CartPole-v1', None, (1024, 128, False), "slots of 128 steps at batch 1024: median env steps to the target 27,648 at batch 1024 with slots of 128 (rank-sum p = 9.98e-05), against 88,000 at the baseline's layout; fewer at p < 0.05", (128, (), 300000), 'a806b8c75cbf4ab8', 1, ((512, 24576.0), (1024, 29184.0), (2048, 52224.0), (4000, 98000.0)), 'measured: trainer preset PPO'),
    ('plain', 'CartPole-v1', 0, (1024, 0, False), 'fixed by the request: 0 steps per env', (0, (), 300000), 'c08d9f3c828f3f23', 1, ((512, 21504.0), (1024, 19456.0), (2048, 51200.0), (4000, 90000.0)), 'measured: trainer preset PPO'),
    ('plain', 'Acrobot-v1', None, (4000, 2000, True), "the baseline's layout (batch 4000, 2000 steps per env): no reference runs to compare it with", (2000, (4000,), 3000000), 'c093415818279b61', 2, ((4096, 1500000.0),), 'assumed: half of max_steps'),
    ('plain', 'Acrobot-v1', 0, (4096, 0, False), 'fixed by the request: 0 steps per env', (0, (), 3000000), 'd7abbe3575c82cd0', 1, ((4096, 1500000.0),), 'assumed: half of max_steps'),
    ('plain', 'LunarLander-v3', None, (4000, 2000, True), "the baseline's layout (batch 4000, 2000 steps per env): median env steps to the target 212,992 at batch 2048 with slots of 128 (rank-sum p = 0.713), against 218,000 at the baseline's layout; none fewer at p < 0.05", (2000, (4000,), 3000000), '04ddebb1698a2dcf', 2, ((4000, 218000.0),), 'measured: trainer preset PPO'),
    ('plain', 'LunarLander-v3', 0, (2048, 0, False), 'fixed by the request: 0 steps per env', (0, (), 3000000), '3ceac4ab2ba9aea0', 1, ((2048, 162816.0), (4096, 241664.0), (16384, 557056.0)), 'measured: trainer preset PPO'),
    ('plain', 'Pendulum-v1', None, (2048, 1024, False), "slots of 1024 steps at batch 2048: median env steps to the target 65,536 at batch 4096 with slots of 128 (rank-sum p = 0.933); 46,080 at batch 2048 with slots of 1024 (rank-sum p = 0.0233), against 62,000 at the baseline's layout; fewer at p < 0.05", (1024, (1024, 2048), 900000), '9e0475fbc54f8762', 1, ((1024, 50688.0), (2048, 46080.0)), 'measured: trainer preset PPO'),
    ('plain', 'Pendulum-v1', 0, (4096, 0, False), 'fixed by the request: 0 steps per env', (0, (), 900000), '465f21a76849943c', 1, ((4096, 450000.0),), 'assumed: half of max_steps'),
    ('plain', 'benchmarks.beacon_env:Beacon-v0', None, (4000, 2000, True), "the baseline's layout (batch 4000, 2000 steps per env): no reference runs to compare it with", (2000, (4000,), 3000000), '6dea55eeea7ffa9e', 2, ((2048, 1500000.0),), 'assumed: half of max_steps'),
    ('plain', 'benchmarks.beacon_env:Beacon-v0', 0, (2048, 0, False), 'fixed by the request: 0 steps per env', (0, (), 3000000), 'b4e58fd33c03cdfa', 1, ((2048, 1500000.0),), 'assumed: half of max_steps'),
    ('ctx', 'CartPole-v1', None, (4000, 2000, True), "the baseline's layout (batch 4000, 2000 steps per env): no reference runs to compare it with", (2000, (4000,), 300000), 'c334b177ae5b133b', 2, ((256, 150000.0),), 'assumed: half of max_steps'),
    ('ctx', 'CartPole-v1', 0, (512, 0, False), 'fixed by the request: 0 steps per env', (0, (), 300000), 'c08d9f3c828f3f23', 1, ((256, 150000.0),), 'assumed: half of max_steps'),
    ('ctx', 'Acrobot-v1', None, (4000, 2000, True), "the baseline's layout (batch 4000, 2000 steps per env): no reference runs to compare it with", (2000, (4000,), 3000000), 'c093415818279b61', 2, ((4096, 1500000.0),), 'assumed: half of max_steps'),
    ('ctx', 'Acrobot-v1', 0, (4096, 0, False), 'fixed by the request: 0 steps per env', (0, (), 3000000), 'd7abbe3575c82cd0', 1, ((4096, 1500000.0),), 'assumed: half of max_steps'),
    ('ctx', 'LunarLander-v3', None, (4000, 2000, True), "the baseline's layout (batch 4000, 2000 steps per env): no reference runs to compare it with", (2000, (4000,), 3000000), '04ddebb1698a2dcf', 2, ((4096, 1500000.0),), 'assumed: half of max_steps'),
    ('ctx', 'LunarLander-v3', 0, (2048, 0, False), 'fixed by the request: 0 steps per env', (0, (), 3000000), '3ceac4ab2ba9aea0', 1, ((4096, 1500000.0),), 'assumed: half of max_steps'),
    ('ctx', 'Pendulum-v1', None, (4000, 2000, True), "the baseline's layout (batch 4000, 2000 steps per env): no reference runs to compare it with", (2000, (4000,), 900000), '56e7cec482bdca60', 2, ((4096, 450000.0),), 'assumed: half of max_steps'),
    ('ctx', 'Pendulum-v1', 0, (4096, 0, False), 'fixed by the request: 0 steps per env', (0, (), 900000), '465f21a76849943c', 1, ((4096, 450000.0),), 'assumed: half of max_steps'),
    ('ctx', 'benchmarks.beacon_env:Beacon-v0', None, (4000, 2000, True), "the baseline's layout (batch 4000, 2000 steps per env): no reference runs to compare it with", (2000, (4000,), 3000000), '6dea55eeea7ffa9e', 2, ((2048, 1500000.0),), 'assumed: half of max_steps'),
    ('ctx', 'benchmarks.beacon_env:Beacon-v0', 0, (2048, 0, False), 'fixed by the request: 0 steps per env', (0, (), 3000000), 'b4e58fd33c03cdfa', 1, ((2048, 1500000.0),), 'assumed: half of max_steps'),
    ('env', 'Acrobot-v1', None, (4000, 2000, True), "the baseline's layout (batch 4000, 2000 steps per env): no reference runs to compare it with", (2000, (4000,), 3000000), 'c093415818279b61', 2, ((4096, 1500000.0),), 'assumed: half of max_steps'),
    ('env', 'Acrobot-v1', 0, (4096, 0, False), 'fixed by the request: 0 steps per env', (0, (), 3000000), 'd7abbe3575c82cd0', 1, ((4096, 1500000.0),), 'assumed: half of max_steps'),
    ('plain', 'CartPole-v1', 512, (1024, 512, False), 'fixed by the request: 512 steps per env', (512, (), 300000), '3996937e3ba46fe5', 1, ((512, 21504.0), (1024, 19456.0), (2048, 51200.0), (4000, 90000.0)), 'measured: trainer preset PPO'),
]


def _job(references: str, env_id: str, steps_per_env: int | None, objective: str,
         monkeypatch: pytest.MonkeyPatch) -> SeraphJob:
    if references == "env":
        monkeypatch.setenv(IGNORE_ENV, "1")
    else:
        monkeypatch.delenv(IGNORE_ENV, raising=False)
    request = SeraphRequest(env_id=env_id, target_reward=100.0, objective=objective, steps_per_env=steps_per_env)
    with references_ignored() if references == "ctx" else contextlib.nullcontext():
        return SeraphJob.of(request)


@pytest.mark.parametrize("case", CASES, ids=lambda c: f"{c[0]}-{c[1]}-{c[2]}")
def test_the_job_decides_as_before(case: tuple, monkeypatch: pytest.MonkeyPatch):
    references, env_id, steps_per_env, layout, reason, shape, key, min_actors, points, source = case
    job = _job(references, env_id, steps_per_env, "cost", monkeypatch)
    assert (job.layout.batch, job.layout.steps_per_env, job.layout.at_baseline) == layout
    assert job.layout.reason == reason
    assert (job.workload.steps_per_env, job.workload.batches, job.workload.max_steps) == shape
    # the workload at the chosen layout is the preset's workload there, PPO settings and all
    assert job.workload == workload_for(env_id, None, "x86_64", shape[0], shape[1])
    assert profile_key(job.workload.key_dict(), "local", hardware="-") == key
    assert job.pilot.min_actors == min_actors
    assert job.reference.points == points and job.reference.source.split(",")[0] == source


@pytest.mark.parametrize("objective", OBJECTIVES.names())
def test_the_objective_changes_only_the_pilot_and_the_objective(objective: str, monkeypatch: pytest.MonkeyPatch):
    cost = _job("plain", "Pendulum-v1", None, "cost", monkeypatch)
    job = _job("plain", "Pendulum-v1", None, objective, monkeypatch)
    assert (job.layout, job.workload, job.reference, job.prices) == (cost.layout, cost.workload, cost.reference, cost.prices)
    cost_only = objective == "cost"
    assert (job.pilot.cost_stop_mb, job.pilot.top_actors) == ((1769, 2) if cost_only else (None, 16))


@pytest.mark.parametrize("env_id", ["CartPole-v1", "Pendulum-v1", "LunarLander-v3"])
def test_the_environment_variable_ignores_the_committed_references_as_the_context_does(
        env_id: str, monkeypatch: pytest.MonkeyPatch) -> None:
    by_context = _job("ctx", env_id, None, "cost", monkeypatch)
    by_variable = _job("env", env_id, None, "cost", monkeypatch)
    assert (by_variable.layout, by_variable.workload, by_variable.reference) == (
        by_context.layout, by_context.workload, by_context.reference)
    assert "no reference runs" in by_variable.layout.reason
