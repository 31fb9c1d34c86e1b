"""Shared by the RL baselines: train one fixed shape through the real trainer and ledger,
and measure a few iterations of a shape (for the tuners that probe before training)."""

from __future__ import annotations

from typing import Any, TypedDict

from optimizers.seraph.pilot import SweepController, Workload
from optimizers.seraph.records import view
from serverless.run_shape import RunShape


def _spec(workload: Workload, shape: RunShape, *, target_reward: float, seed: int, max_steps: int, backend: str) -> Any:
    from serverless.ppo import PPOConfig
    from serverless.trainer import TrainSpec

    ppo = PPOConfig.from_dict(dict(workload.ppo))
    ppo.anneal_steps = workload.max_steps  # every method shares the learning-rate schedule
    return TrainSpec(
        env_id=workload.env_id,
        target_reward=target_reward,
        max_steps=max_steps,
        run=shape.without_layout(),
        ppo=ppo,
        seed=seed,
        backend=backend,
        architecture=workload.architecture,
        checkpoint_every=0,
    )


class RunSummary(TypedDict):
    """What one training run achieved (:func:`summary`)."""

    reached: bool
    env_steps: int
    lambda_time_s: float
    cost_usd: float
    wall_s: float
    iterations: int
    final_mean_return: float | None
    label: str


class ShapeRun(RunSummary):
    """A run at one fixed shape (:func:`train_shape`): its shape and what it achieved."""

    config: dict[str, int]  # RunShape.to_dict()


class SweepRow(TypedDict):
    """One memory size of the memory sweep: the warm batch's cost (USD) and duration (s)."""

    memory_mb: int
    cost_usd: float
    duration_s: float


class OptunaTrial(TypedDict):
    """One trial of the Optuna baseline: the shape it probed, the objective's value and its cost."""

    actors: int
    memory_mb: int
    batch: int
    value: float
    trial_cost_usd: float


class BaselineDetails(TypedDict, total=False):
    """A tuning baseline's own evidence: the memory sweep's rows, or Optuna's trials."""

    sweep: list[SweepRow]
    trials: list[OptunaTrial]


class BaselineRun(ShapeRun, BaselineDetails, total=False):
    """A baseline's run as the benchmarks and the flow report it: the method, what tuning
    cost (charged to the totals) and the seed when a caller adds it."""

    method: str
    seed: int
    tuning_cost_usd: float
    tuning_lambda_s: float
    training_cost_usd: float


def summary(res: Any) -> RunSummary:
    return {
        "reached": res.reached,
        "env_steps": res.env_steps,
        "lambda_time_s": res.lambda_time_s,
        "cost_usd": res.cost_usd,
        "wall_s": res.wall_s,
        "iterations": len(res.iterations),
        "final_mean_return": res.final_mean_return,
        "label": f"time: {res.lambda_time_label} Lambda clock; cost: {res.ledger.label}; wall_s measured",
    }


def train_shape(
    workload: Workload,
    shape: RunShape,
    *,
    target_reward: float,
    seed: int,
    backend: str = "local",
    backend_obj: Any = None,
    progress: bool = False,
) -> ShapeRun:
    """A full training run at a fixed shape; the summary of what it achieved."""
    from serverless.trainer import train

    spec = _spec(workload, shape, target_reward=target_reward, seed=seed, max_steps=workload.max_steps, backend=backend)
    res = train(spec, backend=backend_obj, progress=progress)
    return {"config": shape.to_dict(), **summary(res)}


def probe_shapes(
    workload: Workload,
    shapes: list[RunShape],
    *,
    seed: int,
    backend: str = "local",
    backend_obj: Any = None,
) -> tuple[list[Any], RunSummary]:
    """Run one short training with one iteration per listed shape; the views and a summary."""
    from serverless.trainer import train

    spec = _spec(workload, shapes[0], target_reward=1e30, seed=seed, max_steps=sum(s.batch for s in shapes), backend=backend)
    ctl = SweepController(shapes)
    res = train(spec, backend=backend_obj, controller=ctl, progress=False)
    views = [view(r) for r in res.iterations]
    return views, summary(res)


def train_after_tuning(
    workload: Workload,
    shape: RunShape,
    *,
    method: str,
    target_reward: float,
    seed: int,
    tuning_cost_usd: float,
    tuning_lambda_s: float,
    details: BaselineDetails,
) -> BaselineRun:
    """Train the tuned shape on a fresh backend (no warm actors carried over from the
    tuning probes) and charge the tuning to the totals."""
    out = train_shape(workload, shape, target_reward=target_reward, seed=seed)
    return {
        "method": method,
        **details,
        "tuning_cost_usd": tuning_cost_usd,
        "tuning_lambda_s": tuning_lambda_s,
        **out,
        "training_cost_usd": out["cost_usd"],
        "cost_usd": out["cost_usd"] + tuning_cost_usd,
        "lambda_time_s": out["lambda_time_s"] + tuning_lambda_s,
    }
