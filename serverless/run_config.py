"""The run shape: what a tuner may change between training iterations."""

from __future__ import annotations

from dataclasses import asdict, dataclass

from core.errors import UserError
from serverless.invocation import check_memory_mb
from serverless.presets import DEFAULT_ACTORS, DEFAULT_MEMORY_MB


@dataclass(frozen=True)
class RunConfig:
    """What the tuner may change between iterations."""

    actors: int = DEFAULT_ACTORS
    memory_mb: int = DEFAULT_MEMORY_MB
    batch: int = 256  # env steps per iteration, split over the actors

    def validate(self) -> None:
        if isinstance(self.actors, bool) or not isinstance(self.actors, int) or self.actors < 1:
            raise UserError(f"actors must be a whole number >= 1, got {self.actors!r}")
        check_memory_mb(self.memory_mb)
        if isinstance(self.batch, bool) or not isinstance(self.batch, int) or self.batch < self.actors:
            raise UserError(
                f"batch ({self.batch!r} env steps per iteration) must be a whole number >= actors ({self.actors}): "
                "every actor needs at least one step"
            )

    def steps_per_actor(self) -> list[int]:
        base, extra = divmod(self.batch, self.actors)
        return [base + (1 if i < extra else 0) for i in range(self.actors)]

    def to_dict(self) -> dict[str, int]:
        return asdict(self)
