"""Exhaustive grid: every valid configuration of the knob space (the oracle).

Within the space's value lists and CPU budget nothing can beat the grid's best, so it
is the reference the other optimizers are compared to. It ignores any time budget of
its own; the caller's budget stops it (the result then says it was cut short).
"""

from __future__ import annotations

from ingestion.knobs import KnobSpace
from optimizers.base import Config, Measurement


class GridSearch:
    name = "grid"

    def __init__(self, space: KnobSpace):
        self._configs = iter(list(space.grid()))
        self.size = space.grid_size()
        self.history: list[tuple[Config, Measurement]] = []

    def ask(self) -> Config | None:
        return next(self._configs, None)

    def tell(self, config: Config, measurement: Measurement) -> None:
        self.history.append((dict(config), measurement))
