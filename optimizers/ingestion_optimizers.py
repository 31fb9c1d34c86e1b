"""The ingestion-optimizer registry: InTune and the baselines, by name.

Every entry builds an ask/tell optimizer (:class:`optimizers.asktell.Optimizer`) for any
:class:`~ingestion.pipeline.PipelineSpec` on a :class:`~ingestion.node.Node` from one
:class:`OptimizerRequest`, and declares what it does with a calibration (a profile of the
pipeline fitted to the simulator, :mod:`ingestion.calibrate`):

* ``"required"``: it cannot be built without one (Plumber's LP). :func:`optimizers.tuning.tune_pipeline`
  calibrates the pipeline itself (cached per data and hardware) when the caller gives none;
* ``"optional"``: it uses one when given (InTune starts from the calibrated simulator) and
  otherwise calibrates by itself;
* ``"unused"``: it never looks at one, so it never pays for profiling.

The CLI (``ingest tune --optimizer``), the workload spec (``ingestion.optimizer``,
``ingestion.baselines``) and the benchmarks list :data:`INGESTION_OPTIMIZERS`. Adding an
optimizer is one module plus one ``INGESTION_OPTIMIZERS.register(...)``
(``docs/extending.md``); :func:`optimizers.checker.check_optimizer` checks it keeps the protocol.
"""

from __future__ import annotations

import time

from dataclasses import dataclass
from typing import Any, Callable, Literal

from core.errors import UserError
from core.registry import Registry
from ingestion.node import Node
from ingestion.pipeline import PipelineSpec
from optimizers.asktell import Optimizer

CalibrationUse = Literal["required", "optional", "unused"]


@dataclass(frozen=True)
class OptimizerRequest:
    """What an optimizer is built for: the pipeline, the node, the budget, the seed.

    ``calibration`` returns the pipeline's calibration (a ``Calibration`` or a
    ``PipelineModel``) when called; it is called only by optimizers that use one.
    """

    spec: PipelineSpec
    node: Node
    time_budget_s: float | None = None
    seed: int = 0
    calibration: Callable[[], Any] | None = None

    def load_calibration(self) -> Any:
        return None if self.calibration is None else self.calibration()


@dataclass(frozen=True)
class IngestionOptimizer:
    """A registered ingestion optimizer: its factory and what it needs."""

    name: str
    factory: Callable[[OptimizerRequest], Optimizer]
    calibration: CalibrationUse
    description: str

    @property
    def needs_calibration(self) -> bool:
        return self.calibration == "required"


INGESTION_OPTIMIZERS: Registry[IngestionOptimizer] = Registry("ingestion optimizer")


def make_optimizer(
    name: str,
    spec: PipelineSpec,
    node: Node,
    *,
    time_budget_s: float | None = None,
    seed: int = 0,
    calibration: Callable[[], Any] | None = None,
) -> Optimizer:
    """Build the optimizer registered as ``name`` for ``spec`` on ``node``."""
    entry = INGESTION_OPTIMIZERS.get(name)
    return entry.factory(OptimizerRequest(spec, node, time_budget_s, seed, calibration))


# -- the built-in optimizers: each factory imports its module lazily -------------------------


def _naive(req: OptimizerRequest) -> Optimizer:
    from optimizers.baselines.naive import make_naive_optimizer

    return make_naive_optimizer(req.spec.space)


def _heuristic(req: OptimizerRequest) -> Optimizer:
    from optimizers.baselines.heuristic import make_heuristic_optimizer

    return make_heuristic_optimizer(req.spec.space, req.node.vcpus)


def _autotune(req: OptimizerRequest) -> Optimizer:
    from optimizers.baselines.autotune import make_autotune_optimizer

    return make_autotune_optimizer(req.spec)


def _grid(req: OptimizerRequest) -> Optimizer:
    from optimizers.baselines.grid import GridSearch

    return GridSearch(req.spec.space)


def _hillclimb(req: OptimizerRequest) -> Optimizer:
    from optimizers.baselines.hillclimb import HillClimb

    return HillClimb(req.spec.space, seed=req.seed)


def _optuna(req: OptimizerRequest) -> Optimizer:
    from optimizers.baselines.optuna_search import OptunaSearch

    return OptunaSearch(req.spec.space, seed=req.seed)


def _intune(req: OptimizerRequest) -> Optimizer:
    try:
        from optimizers.intune import make_intune_optimizer
    except ImportError as exc:
        raise UserError(f"optimizer 'intune' is not available in this build ({exc})") from exc
    if req.time_budget_s is None:
        raise UserError("optimizer 'intune' needs a time budget (time_budget_s)")
    started = time.monotonic()
    calibration = req.load_calibration()  # a calibration made here spends the same budget
    left = max(1.0, req.time_budget_s - (time.monotonic() - started))
    return make_intune_optimizer(req.spec, req.node, time_budget_s=left, seed=req.seed, calibration=calibration)


def _plumber(req: OptimizerRequest) -> Optimizer:
    try:
        from optimizers.baselines.plumber import make_plumber_optimizer
    except ImportError as exc:
        raise UserError(f"optimizer 'plumber' is not available in this build ({exc})") from exc
    return make_plumber_optimizer(req.spec.space, req.node, req.load_calibration())


for _entry in (
    IngestionOptimizer("intune", _intune, "optional",
                       "InTune: an action-masked RL agent stepping from the calibrated simulator's best guess"),
    IngestionOptimizer("autotune", _autotune, "unused", "tf.data's own AUTOTUNE on every tunable knob"),
    IngestionOptimizer("plumber", _plumber, "required", "a Plumber-style LP over per-stage core shares"),
    IngestionOptimizer("hillclimb", _hillclimb, "unused", "steepest-ascent hill climbing from the naive configuration, with random restarts"),
    IngestionOptimizer("grid", _grid, "unused", "every configuration of the knob space, in order"),
    IngestionOptimizer("optuna", _optuna, "unused", "Optuna's TPE sampler through its ask/tell interface"),
    IngestionOptimizer("naive", _naive, "unused", "the pipeline as first written: every stage at its smallest parallelism, other knobs at their defaults"),
    IngestionOptimizer("heuristic", _heuristic, "unused", "the rule of thumb: every stage gets all the cores"),
):
    INGESTION_OPTIMIZERS.register(_entry.name, _entry)
