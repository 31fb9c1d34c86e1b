"""The ask/tell protocol and the loop that drives it.

An optimizer proposes configurations (``ask``) and is told what they measured (``tell``),
so one optimizer runs unchanged against a simulator, the live tf.data pipeline or a
training run. :func:`run` drives one under a time and trial budget. The measurement type
is the runtime's (:class:`ingestion.measurement.Measurement` for pipelines); all the loop
needs of it is a ``score`` to maximise.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Callable, Protocol

from core.json_edge import JsonObject
from ingestion.measurement import Config, Measurement


class Optimizer(Protocol):
    name: str

    def ask(self) -> Config | None:
        """The next configuration to measure, or None when the optimizer is done."""
        ...

    def tell(self, config: Config, measurement: Measurement) -> None:
        """Report what ``config`` measured."""
        ...


@dataclass
class Trial:
    config: Config
    measurement: Measurement
    elapsed_s: float


@dataclass
class SearchResult:
    optimizer: str
    best_config: Config | None
    best: Measurement | None
    trials: list[Trial]
    tuning_s: float
    stopped_by: str

    def as_dict(self) -> JsonObject:
        return {
            "optimizer": self.optimizer,
            "config": self.best_config,
            "best": None if self.best is None else self.best.__dict__ | {"extra": dict(self.best.extra)},
            "trials": len(self.trials),
            "tuning_s": self.tuning_s,
            "stopped_by": self.stopped_by,
        }


def run(
    optimizer: Optimizer,
    evaluate: Callable[[Config], Measurement],
    *,
    time_budget_s: float | None = None,
    max_trials: int | None = None,
    clock: Callable[[], float] = time.monotonic,
    on_trial: Callable[[Trial], None] | None = None,
) -> SearchResult:
    """Ask, evaluate, tell until the optimizer is done or a budget runs out."""
    start = clock()
    trials: list[Trial] = []
    best: Trial | None = None
    stopped_by = "optimizer finished"
    while True:
        if max_trials is not None and len(trials) >= max_trials:
            stopped_by = "trial budget"
            break
        if time_budget_s is not None and clock() - start >= time_budget_s:
            stopped_by = "time budget"
            break
        config = optimizer.ask()
        if config is None:
            break
        m = evaluate(config)
        optimizer.tell(config, m)
        trial = Trial(dict(config), m, clock() - start)
        trials.append(trial)
        if on_trial is not None:
            on_trial(trial)
        if best is None or m.score > best.measurement.score:
            best = trial
    return SearchResult(
        optimizer=getattr(optimizer, "name", type(optimizer).__name__),
        best_config=None if best is None else best.config,
        best=None if best is None else best.measurement,
        trials=trials,
        tuning_s=clock() - start,
        stopped_by=stopped_by,
    )
