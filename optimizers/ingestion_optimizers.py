"""The ingestion-optimizer registry: InTune and the baselines, by name.

Every entry builds an ask/tell optimizer (:class:`optimizers.asktell.Optimizer`) for any
:class:`~ingestion.pipeline.PipelineSpec` on a :class:`~ingestion.node.Node` from one
:class:`IngestJob`, and declares what it does with a calibration (a profile of the
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

from core.budget import Budget
from core.errors import UserError
from core.extras import unavailable
from core.registry import Registry
from ingestion.measurement import FINAL_PROTOCOL, SEARCH_PROTOCOL, MeasureProtocol
from ingestion.node import Node
from ingestion.pipeline import PipelineSpec
from optimizers.asktell import Optimizer

CalibrationUse = Literal["required", "optional", "unused"]


@dataclass(frozen=True)
class IngestJob:
    """One ingestion tuning run, worked out once where it starts (the CLI, a task, a benchmark)
    and passed down unchanged: the pipeline (its builder and knob space, with its shards listed),
    the node (cores, RAM), one :class:`~core.budget.Budget` that calibration, agent loading,
    search and confirmation all draw from, the seed, InTune's settings (``settings``: an
    :class:`~optimizers.intune.settings.InTuneSettings`, None for its defaults), the trial cap
    and the measurement protocols of the search and of the final measurement (``final=None``:
    none, the search's own measurement stands).

    ``calibration`` returns the pipeline's calibration (a ``Calibration`` or a ``PipelineModel``)
    when called; it is called only by optimizers that use one.
    """

    spec: PipelineSpec
    node: Node
    budget: Budget
    seed: int = 0
    calibration: Callable[[], Any] | None = None
    settings: Any = None
    max_trials: int | None = None
    search: MeasureProtocol = SEARCH_PROTOCOL
    final: MeasureProtocol | None = FINAL_PROTOCOL

    @classmethod
    def create(cls, spec: PipelineSpec, node: Node, *, time_budget_s: float,
               clock: Callable[[], float] = time.monotonic, **fields: Any) -> "IngestJob":
        """A job whose budget of ``time_budget_s`` starts now on ``clock``."""
        if fields.get("max_trials") is not None and fields["max_trials"] < 1:
            raise UserError(f"max_trials must be at least 1, got {fields['max_trials']}")
        return cls(spec, node, Budget.start(time_budget_s, clock), **fields)

    def load_calibration(self) -> Any:
        return None if self.calibration is None else self.calibration()


@dataclass(frozen=True)
class IngestionOptimizer:
    """A registered ingestion optimizer: its factory and what it needs."""

    name: str
    factory: Callable[[IngestJob], Optimizer]
    calibration: CalibrationUse
    description: str

    @property
    def needs_calibration(self) -> bool:
        return self.calibration == "required"


INGESTION_OPTIMIZERS: Registry[IngestionOptimizer] = Registry("ingestion optimizer")


# -- the built-in optimizers: each factory imports its module lazily -------------------------


def _naive(req: IngestJob) -> Optimizer:
    from optimizers.baselines.naive import make_naive_optimizer

    return make_naive_optimizer(req.spec.space)


def _heuristic(req: IngestJob) -> Optimizer:
    from optimizers.baselines.heuristic import make_heuristic_optimizer

    return make_heuristic_optimizer(req.spec.space, req.node.vcpus)


def _autotune(req: IngestJob) -> Optimizer:
    from optimizers.baselines.autotune import make_autotune_optimizer

    return make_autotune_optimizer(req.spec)


def _grid(req: IngestJob) -> Optimizer:
    from optimizers.baselines.grid import GridSearch

    return GridSearch(req.spec.space)


def _hillclimb(req: IngestJob) -> Optimizer:
    from optimizers.baselines.hillclimb import HillClimb

    return HillClimb(req.spec.space, seed=req.seed)


def _optuna(req: IngestJob) -> Optimizer:
    from optimizers.baselines.optuna_search import OptunaSearch

    return OptunaSearch(req.spec.space, seed=req.seed)


def _intune(req: IngestJob) -> Optimizer:
    try:
        from optimizers.intune import make_intune_optimizer
    except ImportError as exc:
        raise UserError(unavailable("optimizer 'intune'", exc)) from None
    return make_intune_optimizer(req.spec, req.node, budget=req.budget, seed=req.seed,
                                 calibration=req.load_calibration(), settings=req.settings)


def _plumber(req: IngestJob) -> Optimizer:
    try:
        from optimizers.baselines.plumber import make_plumber_optimizer
    except ImportError as exc:
        raise UserError(unavailable("optimizer 'plumber'", exc)) from None
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
