"""Optuna (TPE) over the knob space, through Optuna's own ask/tell interface.

Each knob is a categorical parameter over its allowed values. A proposal over the CPU
budget is told a score of 0 without being measured (TPE learns to avoid it), and a
configuration already measured is told its earlier score, so no trial is wasted on a
repeat. Stops after 200 proposals in a row that bring nothing new.
"""

from __future__ import annotations

from typing import Any

from ingestion.knobs import KnobSpace
from ingestion.measurement import Config, Measurement


class OptunaSearch:
    name = "optuna"

    def __init__(self, space: KnobSpace, *, seed: int = 0, n_startup_trials: int = 8):
        import optuna

        optuna.logging.set_verbosity(optuna.logging.WARNING)
        self.space = space
        self._study = optuna.create_study(
            direction="maximize", sampler=optuna.samplers.TPESampler(seed=seed, n_startup_trials=n_startup_trials)
        )
        self._dists = {k.name: optuna.distributions.CategoricalDistribution(list(k.values)) for k in space.knobs}
        self._seen: dict[tuple[tuple[str, int], ...], float] = {}
        self._open: dict[tuple[tuple[str, int], ...], Any] = {}
        self.history: list[tuple[Config, Measurement]] = []

    def ask(self) -> Config | None:
        for _ in range(200):
            trial = self._study.ask(self._dists)
            config = {name: int(trial.params[name]) for name in self._dists}
            key = tuple(sorted(config.items()))
            if self.space.cpu_used(config) > self.space.cpu_budget:
                self._study.tell(trial, 0.0)
            elif key in self._seen:
                self._study.tell(trial, self._seen[key])
            else:
                self._open[key] = trial
                return config
        return None

    def tell(self, config: Config, measurement: Measurement) -> None:
        key = tuple(sorted(config.items()))
        score = 0.0 if measurement.failed else float(measurement.rows_per_s)
        self._seen[key] = score
        self.history.append((dict(config), measurement))
        trial = self._open.pop(key, None)
        if trial is not None:
            self._study.tell(trial, score)
