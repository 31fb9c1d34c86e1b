"""The discrete space of run shapes Seraph searches, and its defaults."""

from __future__ import annotations

from dataclasses import dataclass

from core.json_edge import JsonObject
from optimizers.seraph.models import all_shapes
from serverless.run_shape import RunShape

#: The concurrent function counts the search considers (a power-of-two ladder).
DEFAULT_ACTOR_COUNTS = (1, 2, 4, 8, 16, 32, 64, 128, 256)
DEFAULT_MEMORY_SWEEP = (512, 885, 1769, 3008, 5307, 10240)
DEFAULT_BATCHES = (500, 1000, 2000, 4000, 8000)


@dataclass(frozen=True)
class SearchSpace:
    """The discrete space Seraph searches.

    ``batches`` stays in a range where PPO (10 epochs of 64-sample minibatches) still
    learns the built-in tasks; ``min_steps_per_actor`` keeps each actor's segment long
    enough that episodes complete often and the bootstrapped tails stay a small part
    of the batch (CleanRL's PPO uses 128-step segments).
    """

    actors: tuple[int, ...] = DEFAULT_ACTOR_COUNTS
    memories: tuple[int, ...] = DEFAULT_MEMORY_SWEEP
    batches: tuple[int, ...] = DEFAULT_BATCHES
    min_steps_per_actor: int = 125

    def shapes(self) -> list[RunShape]:
        return all_shapes(self.actors, self.memories, self.batches, min_steps_per_actor=self.min_steps_per_actor)

    def as_dict(self) -> JsonObject:
        return {
            "actors": list(self.actors),
            "memory_mb": list(self.memories),
            "batch": list(self.batches),
            "min_steps_per_actor": self.min_steps_per_actor,
        }
