"""Grid search over full training runs; its best point is the "oracle" reference.

Every shape of the grid is trained to the target (or the step cap) for every seed.
The oracle for an objective is the shape whose *median over seeds* is best among the
shapes that reached the target on every seed; its median figure is the reference
Seraph is compared with. A grid this coarse is a lower bound on a true oracle.
"""

from __future__ import annotations

import statistics
from typing import Iterable, TypedDict

from optimizers.rl_baselines.common import BaselineRun, ShapeRun, train_shape
from serverless.run_shape import RunShape
from optimizers.seraph.objectives import OBJECTIVES, scale_of
from optimizers.seraph.pilot import Workload


def run_grid(
    workload: Workload, shapes: Iterable[RunShape], *, target_reward: float, seeds: Iterable[int]
) -> list[BaselineRun]:
    rows = []
    for s in shapes:
        for seed in seeds:
            rows.append({"method": "grid", "seed": seed, **train_shape(workload, s, target_reward=target_reward, seed=seed)})
    return rows


SHAPE_KEYS = ("actors", "memory_mb", "batch")


class RankedShape(TypedDict):
    """A grid shape that reached the target on every seed, with its medians over the seeds."""

    config: dict[str, int]
    median: float  # the objective's value of the median cost and time
    objective: str
    median_cost_usd: float
    median_lambda_time_s: float
    seeds: int


def runs_by_shape(rows: Iterable[ShapeRun]) -> dict[tuple[int, int, int], list[ShapeRun]]:
    """The grid's runs grouped by shape, ``(actors, memory_mb, batch)``, in the order first seen."""
    by_shape: dict[tuple[int, int, int], list[ShapeRun]] = {}
    for r in rows:
        c = r["config"]
        by_shape.setdefault((c["actors"], c["memory_mb"], c["batch"]), []).append(r)
    return by_shape


def ranked_shapes(rows: list[ShapeRun], objective: str, weight: float = 0.5) -> list[RankedShape]:
    """The grid's shapes that reached the target on every seed, best first by the objective's
    value of their median cost and median time (``median``; balanced: scaled by the largest
    medians)."""
    obj = OBJECTIVES.make(objective, weight)
    by_shape = runs_by_shape(rows)
    medians = {
        shape: (statistics.median(r["cost_usd"] for r in runs), statistics.median(r["lambda_time_s"] for r in runs))
        for shape, runs in by_shape.items()
        if all(r["reached"] for r in runs)
    }
    scale = scale_of(medians.values())
    ranked = [
        {
            "config": dict(zip(SHAPE_KEYS, shape)),
            "median": obj.value(cost, time_s, scale),
            "objective": objective,
            "median_cost_usd": cost,
            "median_lambda_time_s": time_s,
            "seeds": len(by_shape[shape]),
        }
        for shape, (cost, time_s) in medians.items()
    ]
    return sorted(ranked, key=lambda o: o["median"])


def oracle(rows: list[ShapeRun], objective: str) -> RankedShape | None:
    """The grid shape with the best median (over seeds) time or cost to the target."""
    ranked = ranked_shapes(rows, objective)
    return ranked[0] if ranked else None
