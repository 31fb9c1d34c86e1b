"""Env steps to the target at known batch sizes: the level of the progress model.

The noise scale fixes the *shape* of the steps-vs-batch curve, not its scale:
``E(B) = E_min (1 + B / B_noise)`` needs one point. :func:`reference_for` takes it from the
measured references (``optimizers/seraph/data/references*.json``, written by
``python -m optimizers.seraph.references``), else from :data:`REFERENCES` below, else
assumes half of ``max_steps``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from core.json_edge import JsonObject

if TYPE_CHECKING:
    from optimizers.seraph.references import EnvReferences


@dataclass(frozen=True)
class Reference:
    """Env steps to the target at one or more batch sizes, and where they came from."""

    points: tuple[tuple[int, float], ...]  # (batch, env steps to target)
    source: str
    actors: int = 4  # the actor count of ``points``
    # the same measured at other actor counts: ((actors, ((batch, env steps), ...)), ...)
    by_actors: tuple[tuple[int, tuple[tuple[int, float], ...]], ...] = ()
    runs: tuple[tuple[int, int, float], ...] = ()  # every run behind the points: (actors, batch, env steps)

    @property
    def batch(self) -> int:
        return int(self.points[0][0])

    @property
    def env_steps(self) -> float:
        return float(self.points[0][1])

    def as_dict(self) -> JsonObject:
        d: JsonObject = {"points": [list(p) for p in self.points], "actors": self.actors, "source": self.source}
        if self.by_actors:
            d["by_actors"] = {str(a): [list(p) for p in pts] for a, pts in self.by_actors}
        return d


# Measured or assumed points per built-in env: env steps to the usual target with the
# trainer's preset PPO settings (4 actors) and a step cap of 3x the preset's (the learning
# rate anneals over the cap). See docs/seraph.md ("Reference points").
REFERENCES: dict[str, Reference] = {
    "CartPole-v1": Reference(
        points=((256, 28_160), (1024, 28_672), (4000, 144_000)),
        source="measured: trainer preset, local backend, seed 0, max_steps 300k, target 475 (docs/seraph.md)",
    ),
    "LunarLander-v3": Reference(
        points=((16384, 1_000_000),),
        source="assumed: the trainer preset's 1M-step budget (rl-baselines3-zoo's), target 200 (docs/seraph.md)",
    ),
}


def reference_for(env_id: str, max_steps: int, batch: int, steps_per_env: int = 0,
                  references: "EnvReferences | None" = None) -> Reference:
    """The measured references of ``env_id`` at the slot length ``steps_per_env``
    (:meth:`optimizers.seraph.references.EnvReferences.measured`; ``references``: the env's,
    read already, else read here), else the built-in points, else half of ``max_steps`` at ``batch``."""
    from optimizers.seraph.references import EnvReferences, ignoring_references

    refs = EnvReferences.read(env_id, (steps_per_env, 0)) if references is None else references
    measured = refs.measured(steps_per_env)
    if measured is not None:
        return Reference(
            points=tuple((int(b), float(e)) for b, e in measured["points"]),
            source=measured["source"],
            actors=int(measured["actors"]),
            by_actors=tuple(
                (int(a), tuple((int(b), float(e)) for b, e in entry["points"]))
                for a, entry in sorted(measured.get("by_actors", {}).items(), key=lambda kv: int(kv[0]))
            ),
            runs=tuple(
                (int(entry["actors"]), int(r["batch"]), float(r["env_steps"]))
                for entry in (measured, *measured.get("by_actors", {}).values())
                for r in entry.get("runs", [])
            ),
        )
    ref = None if ignoring_references() else REFERENCES.get(env_id)
    if ref is not None:
        return ref
    return Reference(points=((batch, max_steps / 2),), source="assumed: half of max_steps")
