"""Exhaustive grid: every valid configuration of the knob space (the oracle).

Within the space's value lists and CPU budget nothing can beat the grid's best, so it
is the reference the other optimizers are compared to. It ignores any time budget of
its own; the caller's budget stops it (the result then says it was cut short).
``reverse=True`` proposes the same configurations last to first (a second pass of the
benchmark's grid, so a linear drift of the machine cancels in the mean of the two).
"""

from __future__ import annotations

from ingestion.knobs import KnobSpace
from ingestion.measurement import Config, Measurement


class GridSearch:
    name = "grid"

    def __init__(self, space: KnobSpace, reverse: bool = False):
        configs = list(space.grid())
        self._configs = iter(configs[::-1] if reverse else configs)
        self.size = space.grid_size()
        self.history: list[tuple[Config, Measurement]] = []

    def ask(self) -> Config | None:
        return next(self._configs, None)

    def tell(self, config: Config, measurement: Measurement) -> None:
        self.history.append((dict(config), measurement))
