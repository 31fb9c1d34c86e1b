"""Seraph: a performance-cost aware tuner for serverless RL training.

Library entry points (no Prefect here; ``tasks/`` wraps them), composed by the CLI and
the ``seraph`` flow:

* :class:`SeraphJob`: built once from a :class:`SeraphRequest` (``SeraphJob.of(request)``),
  everything the request implies (layout, workload, pilot, prices, reference, faults);
* :func:`profile` (job) -> :class:`PilotOutcome`: the workload's profile (cached per
  workload, backend and machine);
* :func:`plan` (job, profile) -> :class:`SeraphPlan`: the chosen shape with predicted
  figures and the Pareto front;
* :func:`train` (plan) -> :class:`SeraphResult`: training from that shape to the target,
  with re-tuning;
* :func:`tune_and_train` (job) -> :class:`SeraphResult`: the three in one (what
  ``trainwise rl tune`` runs);
* :data:`OBJECTIVES`: the registry of objectives (``cost``, ``speed``, ``balanced``).
"""

from __future__ import annotations

import importlib
from typing import Any

# Names resolve on first use, so that importing a light module of the package (the
# objectives, the request) does not load the models, numpy and scipy.
_EXPORTS = {
    "OBJECTIVES": "objectives", "Objective": "objectives", "make_objective": "objectives",
    "render_pareto_png": "pareto_plot",
    "Profile": "workload_profile",
    "PilotOutcome": "pilot", "Workload": "pilot", "workload_for": "pilot",
    "RequestError": "request", "SeraphRequest": "request",
    "SeraphPlan": "result", "SeraphResult": "result",
    "Constraints": "search",
    "SeraphJob": "job",
    "plan": "steps", "profile": "steps", "train": "steps", "tune_and_train": "steps",
}
__all__ = sorted(_EXPORTS)


def __getattr__(name: str) -> Any:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return getattr(importlib.import_module(f"{__name__}.{module}"), name)
