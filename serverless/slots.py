"""Env slots: how a batch is split into env streams (``PPOConfig.steps_per_env``).

Pure arithmetic, no imports: the trainer deals the slots out to the functions
(:func:`slot_plan`), and Seraph's planner counts the episodes a batch has in flight
(:func:`slot_count`) without loading the trainer.
"""

from __future__ import annotations


def slot_count(batch: int, actors: int, steps_per_env: int) -> int:
    """The env streams of one batch: ``max(actors, batch // steps_per_env)`` slots, or
    one per actor without slots (``steps_per_env`` <= 0)."""
    return max(actors, batch // steps_per_env) if steps_per_env > 0 else actors


def slot_plan(batch: int, actors: int, steps_per_env: int) -> list[list[tuple[int, int]]]:
    """Per actor, its env slots as (slot, steps): :func:`slot_count` slots share the batch
    (the remainder spread over the first), dealt round-robin.

    For a given batch the slots, their lengths and (see
    :func:`serverless.trainer.rollout_events`) their seeds do not depend on ``actors`` as
    long as ``actors <= batch // steps_per_env``; beyond that every function gets one slot
    and the split follows the actor count again.
    """
    n_slots = slot_count(batch, actors, steps_per_env)
    base, extra = divmod(batch, n_slots)
    steps = [base + (1 if k < extra else 0) for k in range(n_slots)]
    return [[(k, steps[k]) for k in range(a, n_slots, actors)] for a in range(actors)]
