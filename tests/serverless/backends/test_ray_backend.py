"""The Ray backend for real, on one two-CPU local Ray shared by the module's tests: rollout
actors that keep their envs, weights put once, the same learning as the handler in this
process, and a Ray session the user started (or a cluster joined by address) left running."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest
import ray  # make test installs the bench extra: a missing Ray fails this test, never skips it

from serverless import handler as handler_module
from serverless.network import NetworkSpec
from serverless.ppo import PPOConfig
from serverless.trainer import TrainSpec, train
from serverless.run_shape import RunShape
from tests.serverless.test_trainer import InProcessBackend
from tests.serverless.test_user_env import _forget, _write_env_module

ROOT = Path(__file__).resolve().parents[3]
pytestmark = pytest.mark.slow  # a Ray start-up and actor processes


@pytest.fixture(scope="module")
def users_ray() -> Any:
    """A Ray session the user started before any backend."""
    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False, ignore_reinit_error=True)
    try:
        yield ray
    finally:
        ray.shutdown()


def _spec(tmp_path: Path, name: str) -> TrainSpec:
    return TrainSpec(env_id="CartPole-v1", target_reward=10_000, max_steps=3 * 256,
                     run=RunShape(actors=2, memory_mb=1769, batch=256),
                     ppo=PPOConfig(epochs=2, minibatch_size=64, steps_per_env=32), seed=3, backend="ray",
                     checkpoint_every=0, checkpoint_dir=tmp_path / name)


def _learning(result: Any) -> list[Any]:
    return [(r.episodes, r.mean_return, r.ppo_stats.get("policy_loss"), r.ppo_stats.get("value_loss"))
            for r in result.iterations]


def _dead(actor: Any, polls: int = 600) -> bool:
    """Whether ``actor`` is (or within ``polls`` tenths of a second becomes) dead: a kill
    reaches the actor asynchronously."""
    for _ in range(polls):
        try:
            ray.get(actor.reset.remote(), timeout=60)
        except ray.exceptions.RayActorError:
            return True
        time.sleep(0.1)
    return False


def test_ray_trains_exactly_as_the_handler_does_here_and_leaves_the_users_session_up(
        users_ray: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from serverless.backends.ray_backend import RayBackend

    handler_module.reset_warm_state()
    here = train(_spec(tmp_path, "here"), backend=InProcessBackend(), progress=False)
    puts: list[int] = []
    real_put = ray.put
    monkeypatch.setattr(ray, "put", lambda value, **kw: puts.append(len(value)) or real_put(value, **kw))
    backend = RayBackend()  # joins the session above
    try:
        on_ray = train(_spec(tmp_path, "ray"), backend=backend, progress=False)
        actors = backend.actors
    finally:
        backend.close()
    assert len(on_ray.iterations) == 3 and on_ray.episodes > 0
    # the same trajectories as the handler in this process: the same episodes, returns and losses
    assert _learning(on_ray) == _learning(here)
    # one actor per concurrent function, kept across iterations; warm after the first one
    assert len(actors) == 2
    assert [r.rollout["cold_starts"] for r in on_ray.iterations] == [2, 0, 0]
    assert puts and len(puts) == len(on_ray.iterations)  # the weights: one put per iteration
    billed = [line for line in on_ray.ledger.to_dict()["lines"] if line["usd"] > 0]
    assert billed and on_ray.lambda_time_label == "measured"
    # close() killed the backend's actors but left the user's session running
    assert ray.is_initialized() and all(_dead(a) for a in actors)
    assert ray.get(ray.remote(lambda: 7).remote()) == 7


def test_a_new_memory_size_is_a_cold_start_and_a_dead_actor_is_replaced(users_ray: Any) -> None:
    from serverless.backends.checker import probe_events
    from serverless.backends.ray_backend import RayBackend

    events = probe_events(good=2, num_steps=8)[:2]
    backend = RayBackend()
    try:
        cold = [inv.billing.cold_start for inv in backend.invoke(events, 1769, concurrency=2).invocations]
        warm = [inv.billing.cold_start for inv in backend.invoke(events, 1769, concurrency=2).invocations]
        resized = [inv.billing.cold_start for inv in backend.invoke(events, 3008, concurrency=2).invocations]
        victim = backend.actors[1]
        ray.kill(victim)
        assert _dead(victim)
        lost = backend.invoke(events, 3008, concurrency=2).invocations
        again = backend.invoke(events, 3008, concurrency=2).invocations
    finally:
        backend.close()
    assert cold == [True, True] and warm == [False, False] and resized == [True, True]
    assert lost[0].billing.error is None and "rollout actor died" in str(lost[1].billing.error)
    assert again[1].billing.error is None and again[1].billing.cold_start  # a new actor: a cold start


def test_a_user_module_env_and_its_kwargs_reach_the_actors(users_ray: Any, tmp_path: Path,
                                                          monkeypatch: pytest.MonkeyPatch) -> None:
    from serverless.backends.ray_backend import RayBackend
    from serverless.envs import inspect_env
    from serverless.policy import decode_b64
    from serverless.ppo import PPOLearner
    from serverless.rollout_batch import rollout_events

    env_id = _write_env_module(tmp_path, "ray_user_envs")
    monkeypatch.syspath_prepend(str(tmp_path))  # the driver's path: the actors' runtime_env takes it
    try:
        learner = PPOLearner(inspect_env(env_id, hidden=(8,)), PPOConfig(network=NetworkSpec((8,))), seed=0)
        events = rollout_events(env_id, 0, 0, learner, RunShape(actors=2, memory_mb=1769, batch=16),
                                env_kwargs={"speed": 0.25})
        backend = RayBackend()
        try:
            batch = backend.invoke(events, 1769, concurrency=2)
        finally:
            backend.close()
    finally:
        _forget("ray_user_envs")
    assert [inv.billing.error for inv in batch.invocations] == [None, None]
    obs = [decode_b64(inv.result["trajectories_npz_b64"])["obs"] for inv in batch.invocations]
    assert {float(x) for o in obs for x in o[:, 1]} == {0.25}


JOIN_BY_ADDRESS = """
import json, sys, ray
from serverless.backends.checker import probe_events
from serverless.backends.ray_backend import RayBackend

backend = RayBackend(address=sys.argv[1])
batch = backend.invoke(probe_events(good=2, num_steps=8)[:2], 1769, concurrency=2)
backend.close()
print(json.dumps({"errors": [inv.billing.error for inv in batch.invocations],
                  "connected_after_close": ray.is_initialized()}))
"""


def test_joining_a_cluster_by_address_leaves_the_cluster_running(users_ray: Any) -> None:
    address = ray.get_runtime_context().gcs_address
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    proc = subprocess.run([sys.executable, "-c", JOIN_BY_ADDRESS, address], capture_output=True, text=True,
                          env=env, cwd=ROOT, timeout=300)
    assert proc.returncode == 0, proc.stderr[-2000:]
    report = json.loads(proc.stdout.strip().splitlines()[-1])
    assert report == {"errors": [None, None], "connected_after_close": False}  # it disconnected its own driver
    # the cluster it joined (this process's Ray) still runs work, with both CPUs free again
    assert ray.get(ray.remote(num_cpus=2)(lambda: 7).remote(), timeout=120) == 7
