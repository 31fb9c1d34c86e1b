"""Memory-only sweep in the manner of AWS Lambda Power Tuning.

Actors and batch stay at the static default (2 actors, 4,000 steps). For each memory
size the rollout function is invoked twice with the initial policy (the first call
after a memory change is a cold start, so, like Power Tuning's trimmed mean, we keep
the warm one), priced as Power Tuning prices it (billed duration x memory x GB-s
rate; requests and the learner are not part of its figure), and the strategy picks
one: ``cost`` (cheapest, ties by speed), ``speed`` (fastest, ties by cost) or
``balanced`` (w * cost / max + (1 - w) * duration / max). Then a full training run
at that memory. The sweep's own invocations are its tuning cost.
"""

from __future__ import annotations

import base64
from typing import Any

from optimizers.rl_baselines.common import BaselineRun, SweepRow, train_after_tuning
from optimizers.rl_baselines.static import STATIC_DEFAULT
from serverless.run_shape import RunShape
from optimizers.seraph.objectives import OBJECTIVES, scale_of
from optimizers.seraph.space import DEFAULT_MEMORY_SWEEP
from optimizers.seraph.pilot import Workload
from serverless.rollout_event import RolloutEvent


def _events(workload: Workload, shape: RunShape, seed: int) -> list[RolloutEvent]:
    from serverless.envs import inspect_env
    from serverless.policy import encode_weights, export_numpy
    from serverless.ppo import PPOConfig, PPOLearner

    ppo = PPOConfig.from_dict(dict(workload.ppo))
    learner = PPOLearner(inspect_env(workload.env_id, hidden=tuple(ppo.hidden)), ppo, seed=seed)
    weights = base64.b64encode(encode_weights(export_numpy(learner.model))).decode("ascii")
    per = shape.batch // shape.actors
    return [
        {
            "env_id": workload.env_id,
            "num_steps": per,
            "seed": seed * 1000 + i,
            "policy_spec": learner.spec.to_dict(),
            "actor_id": i,
            "weights_npz_b64": weights,
        }
        for i in range(shape.actors)
    ]


def sweep(
    workload: Workload, backend_obj: Any, *, seed: int, memories: tuple[int, ...] = DEFAULT_MEMORY_SWEEP
) -> tuple[list[SweepRow], float, float]:
    """Per memory: warm cost (USD, Power Tuning's formula) and duration (s) of one batch."""
    from serverless.pricing import PriceTable

    prices = PriceTable.load()
    rate = prices.gb_second_price(workload.architecture)
    rows, spent, spent_s = [], 0.0, 0.0
    events = _events(workload, STATIC_DEFAULT, seed)
    for m in memories:
        for attempt in range(2):
            batch = backend_obj.invoke(events, m, concurrency=STATIC_DEFAULT.actors)
            billed = sum(inv.billing.billed_ms for inv in batch.invocations)
            cost = billed / 1000.0 * m / 1024.0 * rate
            spent += cost + prices.request_cost(len(batch.invocations))
            spent_s += batch.lambda_s
            if attempt == 1:
                rows.append({"memory_mb": m, "cost_usd": cost, "duration_s": batch.lambda_s})
    return rows, spent, spent_s


def pick(rows: list[SweepRow], objective: str, weight: float = 0.5) -> int:
    """The memory size the objective prefers (balanced: scaled by the sweep's maxima); exact
    ties go to the objective's tie-break figure, with no tolerance, as Power Tuning does."""
    obj = OBJECTIVES.make(objective, weight)
    figures = [(r["cost_usd"], r["duration_s"]) for r in rows]
    scale = scale_of(figures)
    best = min(rows, key=lambda r: obj.order(r["cost_usd"], r["duration_s"], scale))
    return int(best["memory_mb"])


def run_memory_sweep(
    workload: Workload, *, target_reward: float, seed: int, objective: str, backend_obj: Any, weight: float = 0.5
) -> BaselineRun:
    rows, spent, spent_s = sweep(workload, backend_obj, seed=seed)
    m = pick(rows, objective, weight)
    shape = RunShape(STATIC_DEFAULT.actors, m, STATIC_DEFAULT.batch)
    return train_after_tuning(
        workload, shape, method=f"memory_sweep_{objective}", target_reward=target_reward, seed=seed,
        tuning_cost_usd=spent, tuning_lambda_s=spent_s, details={"sweep": rows},
    )
