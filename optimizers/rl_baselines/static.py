"""Static default baseline: RLlib's PPO defaults mapped to functions.

RLlib's ``PPOConfig`` defaults to ``num_env_runners=2`` and ``train_batch_size=4000``
(ray/rllib/algorithms/ppo/ppo.py); a runner maps to one actor function, and 1,769 MB
is the memory at which a Lambda function gets one full vCPU (AWS Lambda docs). RLlib's
runner steps one env (``num_envs_per_env_runner=1``), so the static default runs one env per
function (``steps_per_env`` 0) whatever the workload says; that is env slots of
``batch / actors`` steps, the layout Seraph's baseline (``optimizers.seraph.baseline``) names,
and trains identically to them.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from optimizers.rl_baselines.common import BaselineRun, train_shape
from optimizers.seraph.baseline import STATIC_DEFAULT_CONFIG
from optimizers.seraph.pilot import Workload

STATIC_DEFAULT = STATIC_DEFAULT_CONFIG.without_layout()  # a search-space point: the run's PPO layout


def run_static(workload: Workload, *, target_reward: float, seed: int, backend_obj: Any = None) -> BaselineRun:
    workload = replace(workload, ppo={**workload.ppo, "steps_per_env": 0})
    out = train_shape(workload, STATIC_DEFAULT, target_reward=target_reward, seed=seed, backend_obj=backend_obj)
    return {"method": "static_default", "tuning_cost_usd": 0.0, "tuning_lambda_s": 0.0, **out}
