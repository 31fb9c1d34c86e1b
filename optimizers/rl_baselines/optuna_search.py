"""Optuna TPE over Seraph's space, with the same trial budget as Seraph's profiling.

Each trial runs the proposed shape for two iterations through the trainer (the first
warms the actors; the second is measured) and scores it by what can be measured
without a model of training dynamics: cost per env step (``cost``), Lambda-clock
time per env step (``speed``) or their normalised blend (``balanced``). Trials stop
once their total modelled cost reaches the budget (Seraph's pilot cost); the best
shape is then trained to the target. The trials' cost is the tuning overhead.
"""

from __future__ import annotations

from typing import Any

from optimizers.rl_baselines.common import BaselineRun, probe_shapes, train_after_tuning
from serverless.run_shape import RunShape
from optimizers.seraph.objectives import OBJECTIVES
from optimizers.seraph.space import SearchSpace
from optimizers.seraph.pilot import Workload


def run_optuna(
    workload: Workload,
    space: SearchSpace,
    *,
    target_reward: float,
    seed: int,
    objective: str,
    budget_usd: float,
    backend_obj: Any,
    weight: float = 0.5,
    max_trials: int = 40,
) -> BaselineRun:
    import optuna

    obj = OBJECTIVES.make(objective, weight)
    optuna.logging.set_verbosity(optuna.logging.WARNING)
    study = optuna.create_study(direction="minimize", sampler=optuna.samplers.TPESampler(seed=seed))
    spent, spent_s, trials = 0.0, 0.0, []
    ref: tuple[float, float] | None = None
    while spent < budget_usd and len(trials) < max_trials:
        t = study.ask()
        batch = t.suggest_categorical("batch", list(space.batches))
        wanted = t.suggest_categorical("actors", list(space.actors))
        # too many actors for the batch: use the most the batch allows (fixed choices keep TPE's model valid)
        actors = max([a for a in space.actors if a <= wanted and batch / a >= space.min_steps_per_actor], default=1)
        memory = t.suggest_categorical("memory_mb", list(space.memories))
        shape = RunShape(actors, memory, batch)
        views, summ = probe_shapes(workload, [shape, shape], seed=seed, backend_obj=backend_obj)
        spent += summ["cost_usd"]
        spent_s += summ["lambda_time_s"]
        warm = views[-1]
        cost_step = (warm.cost_usd - views[0].cost_usd) / batch
        time_step = warm.iteration_lambda_s / batch
        if ref is None:
            ref = (cost_step, time_step)
        value = obj.value(cost_step, time_step, ref)
        study.tell(t, value)
        trials.append({**shape.to_dict(), "value": value, "trial_cost_usd": summ["cost_usd"]})
    best_trial = min(trials, key=lambda r: r["value"])
    best = RunShape(best_trial["actors"], best_trial["memory_mb"], best_trial["batch"])
    return train_after_tuning(
        workload, best, method=f"optuna_tpe_{objective}", target_reward=target_reward, seed=seed,
        tuning_cost_usd=spent, tuning_lambda_s=spent_s, details={"trials": trials},
    )
