"""Ray as a cluster runs it: a two-node local cluster (``ray.cluster_utils.Cluster``) trains
CartPole to 475 with the user's own env module, which neither node has on its path.

The module lives in a temporary directory that only the driver's ``sys.path`` holds (not
``PYTHONPATH``, not any node's working directory), so a worker on either node imports it only
from the package the backend's ``runtime_env`` ships (``py_modules``); the actors are spread over
both nodes (one CPU each).
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest
import ray
from ray.cluster_utils import Cluster

from serverless.presets import preset_for
from serverless.trainer import TrainSpec, train
from serverless.run_shape import RunShape

pytestmark = [pytest.mark.slow, pytest.mark.heavy]  # a two-node Ray cluster and a full training run

USER_ENV = '''
import gymnasium as gym
from gymnasium.envs.classic_control.cartpole import CartPoleEnv


class UserCartPole(CartPoleEnv):
    """CartPole, defined in the user's own module."""


gym.register("UserCartPole-v0", entry_point="{module}:UserCartPole", max_episode_steps=500)
'''


@pytest.fixture(scope="module")
def two_node_cluster() -> Any:
    cluster = Cluster(initialize_head=True, head_node_args={"num_cpus": 1, "include_dashboard": False})
    cluster.add_node(num_cpus=1)
    ray.init(address=cluster.address, log_to_driver=False)
    try:
        cluster.wait_for_nodes()
        yield cluster
    finally:
        ray.shutdown()
        cluster.shutdown()


def _user_env(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> tuple[str, str]:
    """The user's module (in a directory on the driver's ``sys.path`` only) and its env id."""
    module = f"user_cartpole_{tmp_path.name.replace('-', '_')}"
    (tmp_path / "envs").mkdir()
    (tmp_path / "envs" / f"{module}.py").write_text(USER_ENV.replace("{module}", module))
    monkeypatch.syspath_prepend(str(tmp_path / "envs"))
    assert str(tmp_path) not in os.environ.get("PYTHONPATH", "")
    return module, f"{module}:UserCartPole-v0"


def _forget(module: str) -> None:
    import sys

    import gymnasium

    sys.modules.pop(module, None)
    gymnasium.registry.pop("UserCartPole-v0", None)


def test_without_shipping_the_module_the_nodes_cannot_import_it(
        two_node_cluster: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The control: the same cluster, with the backend shipping only the project's packages."""
    from serverless.backends import ray_backend
    from serverless.envs import inspect_env
    from serverless.network import NetworkSpec
    from serverless.ppo import PPOConfig, PPOLearner
    from serverless.rollout_batch import rollout_events

    module, env_id = _user_env(tmp_path, monkeypatch)
    monkeypatch.setattr(ray_backend, "env_modules_of", lambda events: ())
    try:
        learner = PPOLearner(inspect_env(env_id, hidden=(8,)), PPOConfig(network=NetworkSpec((8,))), seed=0)
        events = rollout_events(env_id, 0, 0, learner, RunShape(actors=2, memory_mb=1769, batch=16))
        backend = ray_backend.RayBackend()
        try:
            batch = backend.invoke(events, 1769, concurrency=2)
        finally:
            backend.close()
    finally:
        _forget(module)
    errors = [str(inv.billing.error) for inv in batch.invocations]
    assert len(errors) == 2 and all(module in e and "No module named" in e for e in errors), errors


def test_a_two_node_cluster_trains_cartpole_to_475_with_a_user_module_env(
        two_node_cluster: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from serverless.backends.ray_backend import RayBackend, env_modules_of, rollout_runtime_env

    module, env_id = _user_env(tmp_path, monkeypatch)
    preset = preset_for("CartPole-v1")
    spec = TrainSpec(env_id=env_id, target_reward=475, max_steps=100_000, seed=1, backend="ray",
                     run=preset.run, ppo=preset.ppo,
                     checkpoint_every=0, checkpoint_dir=tmp_path / "ckpt")
    assert len(ray.nodes()) == 2
    backend = RayBackend()  # joins the cluster's session
    try:
        result = train(spec, backend=backend, progress=False)
        nodes = {ray.get(actor.node.remote()) for actor in backend.actors}
    finally:
        backend.close()
        _forget(module)
    shipped = rollout_runtime_env(env_modules_of([{"env_id": env_id}]))
    assert "env_vars" not in shipped and str(tmp_path / "envs" / f"{module}.py") in shipped["py_modules"]
    assert len(nodes) == 2  # an actor on each node
    assert result.reached and result.final_mean_return >= 475

