"""Prefect flows: composition only (the steps live in ``tasks/``, the work in the libraries).

- ``seraph``: profile an RL workload -> plan -> train on functions with re-tuning -> report.
- ``intune``: generate or locate data -> profile the pipeline -> tune -> verify live -> report.
- ``optimize``: both, for one workload file (the main job behind ``trainwise run``).

Flows are imported lazily (:func:`get_flow`) so ``import flows`` stays cheap.
"""

from __future__ import annotations

from typing import Any

FLOW_MODULES = {"optimize": "flows.optimize", "seraph": "flows.seraph", "intune": "flows.intune"}


def get_flow(name: str) -> Any:
    """The flow object called ``name`` (one of :data:`FLOW_MODULES`)."""
    import importlib

    return getattr(importlib.import_module(FLOW_MODULES[name]), name)
