"""The configuration a user would run without Seraph: the baseline it must never lose to.

A baseline is a run shape (:class:`serverless.run_shape.RunShape`) with its rollout layout
set: ``actors`` functions of ``memory_mb``, ``batch`` env steps per iteration, each env
stepping ``steps_per_env`` steps per iteration (env slots, ``PPOConfig.steps_per_env``). The static default is RLlib's PPO defaults as
functions: 2 runners of one env each, 4,000 steps per batch, so 2 envs of 2,000 steps
(``num_env_runners=2``, ``train_batch_size=4000``, ``num_envs_per_env_runner=1``). One env
per function is the layout ``steps_per_env = batch / actors``, and with env slots of that
length the trainer takes exactly the steps it takes without slots (the same env seeds and
segments; checked on CartPole-v1 and LunarLander-v3, seed 0), so any function count up to
``batch // steps_per_env`` trains the baseline's own trajectory.

``--baseline-config actors=2,memory=1769,batch=4000,steps_per_env=2000`` (CLI) or
``rl.baseline_config`` (workload YAML) names another one; ``steps_per_env`` may be left
out (one env per function). Its fields are checked by the shape, the layout by
:meth:`~serverless.run_shape.RunShape.check_layout`; an error names the field (``batch: ...``).
"""

from __future__ import annotations

from serverless.run_shape import RunShape


def baseline_of(shape: RunShape) -> RunShape:
    """``shape`` as a baseline: its layout one env per function when it has none, and checked."""
    return (shape if shape.steps_per_env is not None else shape.one_env_per_function()).check_layout()


def parse_baseline(text: str) -> RunShape:
    """``actors=A,memory=M,batch=B[,steps_per_env=N]`` as a baseline; errors name the key at fault."""
    return baseline_of(RunShape.parse(text))


#: RLlib's PPO defaults as functions (``optimizers.rl_baselines.static``): 2 x 1,769 MB, batch
#: 4,000, one env per function.
STATIC_DEFAULT_CONFIG = baseline_of(RunShape(actors=2, memory_mb=1769, batch=4000, steps_per_env=2000))
