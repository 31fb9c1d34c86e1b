"""Seraph: a performance-cost aware tuner for serverless RL training.

Library entry points (no Prefect here; ``tasks/`` wraps them):

* :func:`profile_workload` (workload, backend) -> profile (cached per workload,
  backend and machine);
* :func:`plan` (profile, objective, constraints) -> plan with predicted figures and
  the Pareto front;
* :func:`tune_and_train` (...) -> the dict ``trainwise rl tune`` writes;
* :func:`render_pareto_png` (plan dict, path).
"""

from __future__ import annotations

from typing import Any

from optimizers.seraph.pareto_plot import render_pareto_png
from optimizers.seraph.planner import Plan
from optimizers.seraph.profiles import Profile
from optimizers.seraph.profiling import Workload, workload_for
from optimizers.seraph.search import Constraints, Objective
from optimizers.seraph.tuner import tune_and_train

__all__ = [
    "Constraints",
    "Objective",
    "Plan",
    "Profile",
    "Workload",
    "plan",
    "profile_workload",
    "render_pareto_png",
    "tune_and_train",
    "workload_for",
]


def profile_workload(workload: Workload, backend: str = "local", **kwargs: Any) -> Profile:
    """The workload's profile: from the cache, or from a fresh pilot run."""
    from optimizers.seraph import profiling

    return profiling.profile_workload(workload, backend, **kwargs).profile


def plan(
    profile: Profile,
    objective: Objective | str = "cost",
    constraints: Constraints | None = None,
    *,
    target_reward: float | None = None,
    weight: float = 0.5,
) -> Plan:
    """Plan a run of ``profile``'s workload for ``objective`` under ``constraints``."""
    from optimizers.seraph.profiling import PilotOutcome
    from optimizers.seraph.tuner import make_planner

    obj = objective if isinstance(objective, Objective) else Objective(objective, weight)
    w = profile.workload
    workload = Workload(w["env_id"], int(w["max_steps"]), dict(w["ppo"]), w.get("architecture", "x86_64"))
    planner = make_planner(
        PilotOutcome(profile, reused=True), workload, obj, constraints or Constraints(),
        target_reward=target_reward,
    )
    return planner.plan()
