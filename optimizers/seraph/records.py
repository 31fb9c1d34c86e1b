"""A narrow view of the trainer's ``IterationRecord``: the fields Seraph reads.

Kept in one place so the planner, the profiler and the phase report agree on what
"iteration time" means: the trainer's own Lambda-clock figure for the iteration,
``iteration_lambda_s`` = ``lambda_s`` (rollout batch) + the learner host's time
(update, encoding weights, assembling the batch), which is what it adds to
``lambda_time_s`` and prices as learner VM time. On the modelled clock the learner's
figures are CPU times, so profiles and fits do not depend on the machine's load.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from optimizers.seraph.models import Observation
from serverless.run_shape import RunShape
from serverless.ppo import GradNoiseProbe


@dataclass(frozen=True)
class RecordView:
    iteration: int
    env_steps: int
    shape: RunShape
    rollout_lambda_s: float
    learner_s: float
    iteration_lambda_s: float
    wall_s: float
    cost_usd: float  # cumulative
    mean_return: float | None
    grad_noise: GradNoiseProbe | None
    cold: bool
    billed_s_mean: float


def _get(record: Any, name: str, default: Any = None) -> Any:
    if isinstance(record, dict):
        return record.get(name, default)
    return getattr(record, name, default)


def view(record: Any) -> RecordView:
    """Read an ``IterationRecord`` (object or its ``to_dict()``)."""
    run = _get(record, "run")
    if isinstance(run, dict):
        shape = RunShape(int(run["actors"]), int(run["memory_mb"]), int(run["batch"]))
    else:
        shape = RunShape(int(run.actors), int(run.memory_mb), int(run.batch))
    rollout = _get(record, "rollout") or {}
    lambda_s = float(_get(record, "lambda_s"))
    modelled = _get(record, "lambda_s_label") == "modelled"
    # on the modelled clock: CPU time, corrected for the host's speed like the rest of that clock
    learner_s = float(_get(record, "learner_cpu_s")) * float(_get(record, "host_speed", 1.0)) if modelled else float(_get(record, "learner_s"))
    wall_s = float(_get(record, "wall_s"))
    invocations = int(rollout.get("invocations", 0) or 0)
    billed_total_ms = float(rollout.get("billed_ms_total", 0.0) or 0.0)
    return RecordView(
        iteration=int(_get(record, "iteration")),
        env_steps=int(_get(record, "env_steps")),
        shape=shape,
        rollout_lambda_s=lambda_s,
        learner_s=learner_s,
        iteration_lambda_s=float(_get(record, "iteration_lambda_s")),
        wall_s=wall_s,
        cost_usd=float(_get(record, "cost_usd")),
        mean_return=_get(record, "mean_return"),
        grad_noise=_get(record, "grad_noise"),
        # not steady state: a new instance, or envs rebuilt by replay after a change of shape
        cold=int(rollout.get("cold_starts", 0) or 0) > 0 or int(rollout.get("replayed_slots", 0) or 0) > 0,
        billed_s_mean=billed_total_ms / 1000.0 / invocations if invocations else 0.0,
    )


def observation(record: Any) -> Observation:
    """The performance-model row for one iteration."""
    r = view(record)
    return Observation(
        shape=r.shape,
        rollout_s=r.rollout_lambda_s,
        billed_s=r.billed_s_mean,
        learner_s=r.learner_s,
        iteration_s=r.iteration_lambda_s,
        cold=r.cold,
    )
