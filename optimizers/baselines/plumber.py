"""A Plumber-style LP baseline: split cores by per-core stage rates from the same profile.

After Plumber (Kuchnik et al., MLSys'22): from a profile, each stage ``i`` has a per-core rate
``rate_i`` (rows per CPU-second). The LP maximises the pipeline rate ``t`` subject to
``t <= rate_i * theta_i`` for every stage, ``sum_i theta_i <= cores`` and ``theta_i <= 1`` for
stages that cannot run in parallel, solved with ``scipy.optimize.linprog``. The fractional core
shares are then rounded to the knob grid: each thread knob takes the largest allowed value not
above its share (0 = inline when its share is under half a core and 0 is allowed), then the
remaining CPU budget goes, one step at a time, to the stage with the lowest ``rate * threads``.

The rates are per thread, as a trace of the running pipeline sees them (rows per second of one
thread's wall time, so time waiting on I/O counts). Knobs other than thread counts keep their defaults (Plumber's LP allocates cores).
"""

from __future__ import annotations

from typing import Any, TypedDict

import numpy as np
from scipy.optimize import linprog

from ingestion.knobs import Config, KnobSpace
from ingestion.node import Node
from ingestion.simulator import PipelineModel, stage_costs
from optimizers.baselines._fixed import FixedConfigs
from core.errors import UserError


def solve_lp(rates: list[float], parallel: list[bool], cores: float) -> tuple[float, list[float]]:
    """Maximise min_i rate_i * theta_i s.t. sum theta <= cores, theta_i <= 1 if not parallel.

    Returns the LP's rate and the core share of each stage.
    """
    k = len(rates)
    # variables: theta_0..theta_{k-1}, t ; minimise -t
    c = np.zeros(k + 1)
    c[-1] = -1.0
    a_ub, b_ub = [], []
    for i, r in enumerate(rates):
        row = np.zeros(k + 1)
        row[i], row[-1] = -r, 1.0  # t - r_i theta_i <= 0
        a_ub.append(row)
        b_ub.append(0.0)
    row = np.zeros(k + 1)
    row[:k] = 1.0
    a_ub.append(row)
    b_ub.append(cores)
    bounds = [(0.0, None if p else 1.0) for p in parallel] + [(0.0, None)]
    res = linprog(c, A_ub=np.array(a_ub), b_ub=np.array(b_ub), bounds=bounds, method="highs")
    if not res.success:
        raise RuntimeError(f"Plumber LP failed: {res.message}")
    return float(res.x[-1]), [float(v) for v in res.x[:k]]


def round_to_grid(space: KnobSpace, shares: dict[str, float], rates: dict[str, float]) -> Config:
    """Thread knobs from fractional core shares (see module docstring)."""
    config = space.initial()
    for k in space.cpu_knobs:
        share = shares.get(k.name, 0.0)
        if 0 in k.values and share < 0.5:
            config[k.name] = 0
            continue
        positive = [v for v in k.values if v > 0] or list(k.values)
        config[k.name] = min(positive, key=lambda v: (abs(v - share), v))  # the nearest allowed value
    def slowest(c: Config) -> float:
        return min(rates[k.name] * max(c[k.name], 0.5) for k in space.cpu_knobs)

    while space.cpu_used(config) > space.cpu_budget:  # nearest picks may overshoot: shed where it hurts least
        k = max((k for k in space.cpu_knobs if k.step(config[k.name], -1) is not None),
                key=lambda k: slowest({**config, k.name: k.step(config[k.name], -1)}))
        config[k.name] = k.step(config[k.name], -1)
    while True:
        candidates = []
        for k in space.cpu_knobs:
            up = k.step(config[k.name], 1)
            if up is not None and space.cpu_used({**config, k.name: up}) <= space.cpu_budget:
                candidates.append((rates[k.name] * max(config[k.name], 0.5), k.name, up))
        if not candidates:
            return config
        _, name, up = min(candidates)
        config[name] = up


class PlumberPlan(TypedDict):
    """The LP's optimum (rows/s), each stage's share of the cores, and the configuration rounded to the grid."""

    lp_rows_per_s: float
    core_shares: dict[str, float]
    config: Config


def plumber_plan(space: KnobSpace, node: Node, model: PipelineModel) -> PlumberPlan:
    """The LP, its solution and the rounded configuration."""
    config = space.initial()
    c, w, _, _ = stage_costs(model, config)
    rates = [1.0 / max(ci + wi, 1e-12) for ci, wi in zip(c, w)]
    parallel = [s.threads_knob is not None for s in model.stages]
    lp_rate, theta = solve_lp(rates, parallel, float(node.vcpus))
    shares = {s.threads_knob: theta[i] for i, s in enumerate(model.stages) if s.threads_knob}
    knob_rates = {s.threads_knob: rates[i] for i, s in enumerate(model.stages) if s.threads_knob}
    rounded = round_to_grid(space, shares, knob_rates)
    return {"lp_rows_per_s": lp_rate, "core_shares": {s.name: theta[i] for i, s in enumerate(model.stages)},
            "config": rounded}


def make_plumber_optimizer(space: KnobSpace, node: Node, calibration: Any) -> FixedConfigs:
    """One-shot optimizer proposing the LP's configuration for ``space`` on ``node``."""
    if calibration is None:
        raise UserError("the plumber optimizer needs a calibration (a profile of the pipeline); none was given")
    model = calibration if isinstance(calibration, PipelineModel) else calibration.model
    plan = plumber_plan(space, node, model)
    opt = FixedConfigs("plumber", [plan["config"]])
    opt.plan = plan  # type: ignore[attr-defined]
    return opt
