"""An optimizer that proposes a fixed list of configurations, once each.

The single-configuration baselines (naive, heuristic, AUTOTUNE) are instances: they
"tune" by measuring the one configuration they stand for.
"""

from __future__ import annotations

from ingestion.measurement import Config, Measurement


class FixedConfigs:
    """Ask each configuration in order, then stop."""

    def __init__(self, name: str, configs: list[Config]):
        self.name = name
        self._queue = [dict(c) for c in configs]
        self.history: list[tuple[Config, Measurement]] = []

    def ask(self) -> Config | None:
        return self._queue.pop(0) if self._queue else None

    def tell(self, config: Config, measurement: Measurement) -> None:
        self.history.append((dict(config), measurement))
