"""A time budget: one deadline that every step of a run draws from."""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Callable

from core.errors import UserError


@dataclass(frozen=True)
class Budget:
    """``total_s`` seconds from ``started`` on ``clock``. Made once where a run starts (the CLI,
    a task, a benchmark) and passed down, so set-up, search and confirmation all spend the same
    seconds and no layer trims its own copy."""

    total_s: float
    started: float
    clock: Callable[[], float] = field(default=time.monotonic, compare=False)

    @classmethod
    def start(cls, total_s: float, clock: Callable[[], float] = time.monotonic) -> "Budget":
        """A budget of ``total_s`` seconds starting now; a budget that is not positive is a user error."""
        if not total_s > 0:
            raise UserError(f"the time budget must be positive, got {total_s} s")
        return cls(float(total_s), clock(), clock)

    def elapsed(self) -> float:
        return self.clock() - self.started

    def remaining(self) -> float:
        """Seconds left (never below zero)."""
        return max(0.0, self.total_s - self.elapsed())

    def expired(self) -> bool:
        return self.remaining() <= 0.0

    def share(self, fraction: float) -> float:
        """Seconds a step may take: ``fraction`` of the total, at most what is left."""
        return min(fraction * self.total_s, self.remaining())
