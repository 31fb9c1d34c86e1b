"""The Ray backend for real: a one-CPU local Ray cluster trains PPO for a few iterations."""

from __future__ import annotations

from pathlib import Path

import pytest
import ray  # make test installs the bench extra: a missing Ray fails this test, never skips it


@pytest.fixture(scope="module")
def one_cpu_ray() -> object:
    ray.init(num_cpus=1, include_dashboard=False, log_to_driver=False, ignore_reinit_error=True)
    try:
        yield ray
    finally:
        ray.shutdown()


@pytest.mark.slow  # a Ray start-up
def test_ray_backend_trains_a_few_iterations(one_cpu_ray: object, tmp_path: Path) -> None:
    from serverless.backends.ray_backend import RayBackend
    from serverless.trainer import RunConfig, TrainSpec, train

    backend = RayBackend()  # joins the one-CPU cluster started above
    spec = TrainSpec(env_id="CartPole-v1", target_reward=10_000, max_steps=3 * 256,
                     run=RunConfig(actors=2, memory_mb=1769, batch=256), backend="ray",
                     checkpoint_every=0, checkpoint_dir=tmp_path)
    try:
        result = train(spec, backend=backend, progress=False)
    finally:
        backend.close()
    assert not result.reached and result.stop_reason  # 10,000 is out of reach: it stops at max_steps
    assert len(result.iterations) == 3 and result.env_steps >= 3 * 256
    assert result.episodes > 0 and result.final_mean_return is not None
    # every rollout ran as a Ray task and was billed from its own measured duration
    billed = [line for line in result.ledger.to_dict()["lines"] if line["usd"] > 0]
    assert billed and result.lambda_time_label == "measured"
