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
    # the rollout layout (env slots of about this many steps); None: the PPO config's
    # ``steps_per_env``, which the run starts with. A tuner that changes it changes what is learned.
    steps_per_env: int | None = None

    def validate(self) -> None:
        if isinstance(self.actors, bool) or not isinstance(self.actors, int) or self.actors < 1:
            raise UserError(f"actors must be a whole number >= 1, got {self.actors!r}")
        check_memory_mb(self.memory_mb)
        if isinstance(self.batch, bool) or not isinstance(self.batch, int) or self.batch < self.actors:
            raise UserError(
                f"batch ({self.batch!r} env steps per iteration) must be a whole number >= actors ({self.actors}): "
                "every actor needs at least one step"
            )
        spe = self.steps_per_env
        if spe is not None and (isinstance(spe, bool) or not isinstance(spe, int) or spe < 0):
            raise UserError(f"steps_per_env must be None or a whole number >= 0, got {spe!r}")

    def steps_per_actor(self) -> list[int]:
        base, extra = divmod(self.batch, self.actors)
        return [base + (1 if i < extra else 0) for i in range(self.actors)]

    def to_dict(self) -> dict[str, int]:
        data = asdict(self)
        if self.steps_per_env is None:
            del data["steps_per_env"]  # the run's PPO config's layout
        return data
