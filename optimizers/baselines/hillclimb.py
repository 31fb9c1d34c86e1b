"""Hill climbing over the knob space, with random restarts.

Steepest ascent: measure every valid neighbour (one knob one step away) of the current
configuration, move to the best one if it beats the current by more than ``min_gain``
(5% by default: measurements on a shared machine are noisy, and chasing noise wastes
trials). At a local optimum, restart from a random unvisited configuration. A
configuration is never measured twice. Starts from the naive configuration, as a user
tuning by hand would.
"""

from __future__ import annotations

import random

from ingestion.knobs import KnobSpace
from ingestion.measurement import Config, Measurement
from optimizers.baselines.naive import naive_config


def _key(config: Config) -> tuple[tuple[str, int], ...]:
    return tuple(sorted(config.items()))


class HillClimb:
    name = "hillclimb"

    def __init__(self, space: KnobSpace, *, seed: int = 0, min_gain: float = 0.05, start: Config | None = None):
        self.space = space
        self.min_gain = min_gain
        self._rng = random.Random(seed)
        self._seen: dict[tuple[tuple[str, int], ...], float] = {}
        self._current: Config | None = None
        self._current_score = float("-inf")
        self._pending: list[Config] = [dict(start) if start else naive_config(space)]
        self._round: list[tuple[Config, float]] = []
        self.history: list[tuple[Config, Measurement]] = []
        self.restarts = 0

    def _unseen(self, configs: list[Config]) -> list[Config]:
        out, keys = [], set()
        for c in configs:
            k = _key(c)
            if k not in self._seen and k not in keys:
                keys.add(k)
                out.append(c)
        return out

    def _next_round(self) -> None:
        """Decide the move after a round of neighbours, then queue the next round."""
        if self._round:
            best, score = max(self._round, key=lambda t: t[1])
            self._round = []
            if self._current is None or score > self._current_score * (1 + self.min_gain):
                self._current, self._current_score = best, score
                self._pending = self._unseen(list(self.space.neighbours(best)))
                if self._pending:
                    return
            # local optimum: restart somewhere unvisited
        grid = [c for c in self.space.grid() if _key(c) not in self._seen]
        if not grid:
            self._pending = []
            return
        self.restarts += 1
        start = self._rng.choice(grid)
        self._current, self._current_score = None, float("-inf")
        self._pending = [start]

    def ask(self) -> Config | None:
        if not self._pending:
            self._next_round()
        return dict(self._pending[0]) if self._pending else None

    def tell(self, config: Config, measurement: Measurement) -> None:
        self.history.append((dict(config), measurement))
        self._seen[_key(config)] = measurement.score
        self._round.append((dict(config), measurement.score))
        self._pending = [c for c in self._pending if _key(c) != _key(config)]
        self._pending = self._unseen(self._pending)
