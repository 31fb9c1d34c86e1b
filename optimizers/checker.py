"""The ingestion-optimizer contract check (in the spirit of Gymnasium's ``check_env``).

:func:`check_optimizer` builds an optimizer from its factory for a simulated DLRM-like
pipeline (:mod:`ingestion.simulator`, a 4-vCPU node) and drives it through the ask/tell
loop of :func:`optimizers.asktell.run` under a trial cap. It raises
:class:`OptimizerContractError` naming the first broken promise:

* the optimizer has a ``name`` and ``ask``/``tell``;
* every configuration ``ask`` returns names each knob of the space exactly once, with one
  of the knob's allowed values, or AUTOTUNE (-1) on a knob the pipeline lets tf.data tune.
  A configuration may ask for more threads than the CPU budget (the heuristic baseline
  does, on purpose);
* ``tell`` accepts every measurement, including a failed one: the second trial is told as an
  out-of-memory failure (``failed=True``, zero rows/s), as the live measurement reports a crash;
  an optimizer that proposes one configuration only is told, after it is done, that a
  re-measurement of it failed, and must then still answer ``ask`` with None or a valid one;
* within the cap, ``ask`` either returns None (done) or keeps proposing valid configurations,
  and at least one configuration is proposed.

The simulator has no model of tf.data's own tuning, so a knob at AUTOTUNE is simulated at
its default value; the figures are labelled ``simulated`` and only drive the loop.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable, Mapping

import numpy as np

from ingestion.measurement import Config, Measurement
from ingestion.pipeline import PipelineSpec
from ingestion.node import Node
from ingestion.simulator import dlrm_like_space, random_pipeline, simulate
from optimizers.asktell import Optimizer, run
from core.budget import Budget
from optimizers.ingestion_optimizers import IngestJob

AUTOTUNE = -1  # tf.data.AUTOTUNE's value
INJECTED_FAILURE = "out of memory (injected by the contract check)"


class OptimizerContractError(AssertionError):
    """An ingestion optimizer broke the ask/tell contract."""


@dataclass(frozen=True)
class OptimizerCheck:
    """What the check saw."""

    optimizer: str
    trials: int
    stopped_by: str
    best_rows_per_s: float  # simulated


def _no_build(config: Config) -> Any:
    raise RuntimeError("the contract check's pipeline is simulated; it is never built")


def check_problem(seed: int = 0) -> tuple[IngestJob, Any]:
    """The simulated tuning problem the check uses: the request and the true pipeline model."""
    node = Node("check-4vcpu", vcpus=4, ram_gib=8.0)
    truth = random_pipeline(np.random.default_rng(seed), "parse")
    spec = PipelineSpec("contract-check", build=_no_build, space=dlrm_like_space(node), rows_per_element=1)
    return IngestJob(spec, node, Budget.start(30.0), seed=seed, calibration=lambda: truth), truth


def config_problem(config: Any, spec: PipelineSpec) -> str | None:
    """Why ``config`` is not a configuration of ``spec``'s space, or None if it is."""
    if not isinstance(config, Mapping):
        return f"ask returned a {type(config).__name__}, not a configuration dict"
    space = spec.space
    if sorted(config) != sorted(space.names):
        return f"configuration names knobs {sorted(config)}, the space has {sorted(space.names)}"
    autotunable = set(spec.autotune_knobs())
    for k in space.knobs:
        v = config[k.name]
        if isinstance(v, bool) or not isinstance(v, (int, np.integer)):
            return f"knob {k.name!r} = {v!r} is not an integer"
        if v not in k.values and not (v == AUTOTUNE and k.name in autotunable):
            return f"knob {k.name!r} = {v!r} is not one of {list(k.values)}"
    return None


def check_optimizer(factory: Callable[[IngestJob], Optimizer], *, max_trials: int = 30,
                    seed: int = 0) -> OptimizerCheck:
    """Exercise the optimizer ``factory`` builds (see the module doc)."""
    request, truth = check_problem(seed)
    opt = factory(request)
    name = getattr(opt, "name", None)
    if not isinstance(name, str) or not name:
        raise OptimizerContractError(f"{opt!r} has no name")
    if not callable(getattr(opt, "ask", None)) or not callable(getattr(opt, "tell", None)):
        raise OptimizerContractError(f"optimizer {name!r} lacks ask() or tell()")
    failed = Measurement(rows_per_s=0.0, failed=True, label="simulated", extra={"failure": INJECTED_FAILURE})
    defaults = {k.name: k.initial for k in request.spec.space.knobs}

    def valid(config: Any) -> Config:
        problem = config_problem(config, request.spec)
        if problem is not None:
            raise OptimizerContractError(f"optimizer {name!r}: {problem}")
        return config

    def evaluate(config: Config) -> Measurement:
        valid(config)
        evaluate.calls += 1  # type: ignore[attr-defined]
        if evaluate.calls == 2:  # type: ignore[attr-defined]
            return failed
        concrete = {k: (defaults[k] if v == AUTOTUNE else int(v)) for k, v in config.items()}
        return simulate(truth, concrete, request.node)

    evaluate.calls = 0  # type: ignore[attr-defined]
    result = run(opt, evaluate, max_trials=max_trials)
    if not result.trials:
        raise OptimizerContractError(f"optimizer {name!r} proposed no configuration")
    if len(result.trials) == 1 and result.stopped_by == "optimizer finished":
        opt.tell(dict(result.trials[0].config), failed)  # a re-measurement that crashed
        after = opt.ask()
        if after is not None:
            valid(after)
    best = result.best.rows_per_s if result.best is not None else 0.0
    return OptimizerCheck(name, len(result.trials), result.stopped_by, best)
