"""Per-env presets: Pendulum-v1's tuned PPO settings, and that they learn the task."""

from __future__ import annotations

import pytest

from serverless.presets import has_preset, preset_for
from serverless.run_shape import RunShape


def test_pendulum_has_rl_zoos_ppo_settings_without_gsde() -> None:
    assert has_preset("Pendulum-v1")
    p = preset_for("Pendulum-v1")
    assert p.run.batch == 4 * 1024 and p.max_steps == 300_000
    ppo = p.ppo
    assert (ppo.learning_rate, ppo.gamma, ppo.gae_lambda, ppo.epochs, ppo.minibatch_size, ppo.clip_coef, ppo.ent_coef) == (
        1e-3, 0.9, 0.95, 10, 64, 0.2, 0.0
    )


def test_a_preset_is_a_fresh_copy() -> None:
    p = preset_for("Pendulum-v1")
    p.ppo.gamma = 0.5
    assert preset_for("Pendulum-v1").ppo.gamma == 0.9


@pytest.mark.slow
def test_the_pendulum_preset_learns_in_a_few_iterations(tmp_path) -> None:
    """Twelve iterations of the preset on seed 10 (deterministic per seed and library build):
    the mean return of the last iteration's episodes is far above the first's (a random
    policy scores about -1,200; the preset's curve climbs from the fifth iteration on)."""
    from serverless.trainer import TrainSpec, train

    p = preset_for("Pendulum-v1")
    spec = TrainSpec(
        env_id="Pendulum-v1", target_reward=0.0, max_steps=12 * p.run.batch,
        run=RunShape(actors=1, memory_mb=1769, batch=p.run.batch), ppo=p.ppo, seed=10, backend="local",
        checkpoint_every=0, checkpoint_dir=tmp_path / "ckpt",
    )
    result = train(spec, progress=False)
    returns = [point["mean_return"] for point in result.curve]
    assert result.env_steps == 12 * p.run.batch and len(returns) == 12
    assert returns[0] < -900 and returns[-1] > returns[0] + 400
