"""Baseline ingestion optimizers and the registry the CLI and benchmarks use.

Every optimizer here speaks the ask/tell protocol of :mod:`optimizers.asktell` and works
on any :class:`~ingestion.pipeline.PipelineSpec`. ``intune`` (the RL agent) and
``plumber`` (the LP) live in modules written separately and are imported lazily, so
a missing one is reported as "not available" rather than breaking the others.
"""

from __future__ import annotations

from typing import Any, Callable

from ingestion.node import Node
from ingestion.pipeline import PipelineSpec
from optimizers.asktell import Optimizer
from core.errors import UserError

OPTIMIZERS = ("intune", "autotune", "plumber", "hillclimb", "grid", "optuna", "naive", "heuristic")


def make_optimizer(
    name: str,
    spec: PipelineSpec,
    node: Node,
    *,
    time_budget_s: float | None = None,
    seed: int = 0,
    calibration: Callable[[], Any] | None = None,
) -> Optimizer:
    """Build optimizer ``name`` for ``spec`` on ``node``.

    ``calibration`` is a callable returning the simulator calibration; it is only called
    for the model-based optimizers (plumber, and intune if it wants one), so the others
    never pay for profiling.
    """
    space = spec.space
    if name == "naive":
        from optimizers.baselines.naive import make_naive_optimizer

        return make_naive_optimizer(space)
    if name == "heuristic":
        from optimizers.baselines.heuristic import make_heuristic_optimizer

        return make_heuristic_optimizer(space, node.vcpus)
    if name == "autotune":
        from optimizers.baselines.autotune import make_autotune_optimizer

        return make_autotune_optimizer(spec)
    if name == "grid":
        from optimizers.baselines.grid import GridSearch

        return GridSearch(space)
    if name == "hillclimb":
        from optimizers.baselines.hillclimb import HillClimb

        return HillClimb(space, seed=seed)
    if name == "optuna":
        from optimizers.baselines.optuna_search import OptunaSearch

        return OptunaSearch(space, seed=seed)
    if name == "intune":
        try:
            from optimizers.intune import make_intune_optimizer
        except ImportError as exc:
            raise UserError(f"optimizer 'intune' is not available in this build ({exc})") from exc
        return make_intune_optimizer(spec, node, time_budget_s=time_budget_s, seed=seed)
    if name == "plumber":
        try:
            from optimizers.baselines.plumber import make_plumber_optimizer
        except ImportError as exc:
            raise UserError(f"optimizer 'plumber' is not available in this build ({exc})") from exc
        return make_plumber_optimizer(space, node, calibration() if calibration else None)
    raise UserError(f"unknown optimizer {name!r}; allowed: {', '.join(OPTIMIZERS)}")
