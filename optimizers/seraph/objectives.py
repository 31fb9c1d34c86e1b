"""Seraph's objectives: what a plan minimises, and how near-ties are settled.

Each objective is a small frozen class registered in :data:`OBJECTIVES`. It scores a
candidate from two figures, its predicted (or measured) cost and time to the target:

* :meth:`Objective.value`: the scalar the objective minimises;
* :meth:`Objective.tie_break`: the other figure, which decides between candidates whose
  values lie within :attr:`Objective.tie_tolerance` of the best value.

The names follow AWS Lambda Power Tuning's strategies: ``cost`` (cheapest, ties broken by
time), ``speed`` (fastest, ties broken by cost) and ``balanced`` with weight ``w``
(``w * cost / cost_scale + (1 - w) * time / time_scale``; the caller picks the scales,
for example the maxima over a Pareto front, so one absurd shape cannot flatten them).

Adding an objective is one subclass plus ``OBJECTIVES.register``; the CLI's help, the
workload-spec validation and the planner read the registry.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Callable, ClassVar, Iterable, TypeVar

from core.errors import UserError
from core.registry import Registry

T = TypeVar("T")

#: Predicted figures closer than this count as ties for ``cost`` and ``speed``: the models
#: are good to ~10-15% (iteration-time error) and the memory probe's single calls to ~2-3%,
#: so a shape 2% faster on paper (e.g. 3,008 MB for a single-threaded handler, which the
#: emulator cannot make faster than 1,769 MB) is no reason to pay 70% more per GB-second.
TIE_TOLERANCE = 0.03

Scale = tuple[float, float]  # (cost scale, time scale) for objectives that mix the two
UNIT_SCALE: Scale = (1.0, 1.0)


@dataclass(frozen=True)
class Objective:
    """An objective for Seraph's plans; subclasses set ``name`` and the two figures."""

    weight: float = 0.5  # the weight of cost; only ``balanced`` uses it
    name: ClassVar[str] = ""
    tie_tolerance: ClassVar[float] = 0.0
    uses_weight: ClassVar[bool] = False

    def __post_init__(self) -> None:
        if not (isinstance(self.weight, (int, float)) and math.isfinite(self.weight) and 0.0 <= self.weight <= 1.0):
            raise UserError(f"weight must be between 0 and 1 (the weight of cost in 'balanced'), got {self.weight}")

    def value(self, cost: float, time_s: float, scale: Scale = UNIT_SCALE) -> float:
        """The scalar this objective minimises."""
        raise NotImplementedError

    def tie_break(self, cost: float, time_s: float) -> float:
        """The figure that decides between candidates tied on :meth:`value`."""
        raise NotImplementedError

    def order(self, cost: float, time_s: float, scale: Scale = UNIT_SCALE) -> tuple[float, float]:
        """Sort key: the value, then the tie-break figure."""
        return self.value(cost, time_s, scale), self.tie_break(cost, time_s)

    def best(self, items: Iterable[T], figures: Callable[[T], tuple[float, float]], scale: Scale = UNIT_SCALE) -> T:
        """The best item by value; among those within ``tie_tolerance`` of it, the best by
        the tie-break figure. ``figures(item)`` gives (cost, time)."""
        pool = list(items)
        first = min(pool, key=lambda i: self.order(*figures(i), scale))
        bar = self.value(*figures(first), scale) * (1 + self.tie_tolerance)
        near = [i for i in pool if self.value(*figures(i), scale) <= bar]
        return min(near, key=lambda i: (self.tie_break(*figures(i)), self.value(*figures(i), scale)))

    def weight_or_none(self) -> float | None:
        """The weight as a plan reports it: only for objectives that use it."""
        return self.weight if self.uses_weight else None


@dataclass(frozen=True)
class Cost(Objective):
    """Least cost to the target; ties (within 3%) go to the faster."""

    name: ClassVar[str] = "cost"
    tie_tolerance: ClassVar[float] = TIE_TOLERANCE

    def value(self, cost: float, time_s: float, scale: Scale = UNIT_SCALE) -> float:
        return cost

    def tie_break(self, cost: float, time_s: float) -> float:
        return time_s


@dataclass(frozen=True)
class Speed(Objective):
    """Least time to the target; ties (within 3%) go to the cheaper."""

    name: ClassVar[str] = "speed"
    tie_tolerance: ClassVar[float] = TIE_TOLERANCE

    def value(self, cost: float, time_s: float, scale: Scale = UNIT_SCALE) -> float:
        return time_s

    def tie_break(self, cost: float, time_s: float) -> float:
        return cost


@dataclass(frozen=True)
class Balanced(Objective):
    """``weight * cost / cost_scale + (1 - weight) * time / time_scale``; exact ties go to the faster."""

    name: ClassVar[str] = "balanced"
    uses_weight: ClassVar[bool] = True

    def value(self, cost: float, time_s: float, scale: Scale = UNIT_SCALE) -> float:
        return self.weight * cost / scale[0] + (1 - self.weight) * time_s / scale[1]

    def tie_break(self, cost: float, time_s: float) -> float:
        return time_s


def scale_of(figures: Iterable[tuple[float, float]]) -> Scale:
    """(largest cost, largest time) of ``figures``, each 1.0 when empty or zero."""
    pairs = list(figures)
    return (max((c for c, _ in pairs), default=1.0) or 1.0, max((t for _, t in pairs), default=1.0) or 1.0)


class ObjectiveRegistry(Registry[type[Objective]]):
    """Objective classes by name, in registration order (a :class:`core.registry.Registry`
    whose ``register`` takes the class and reads its ``name``)."""

    def __init__(self) -> None:
        super().__init__("Seraph objective")

    def register(self, cls: type[Objective]) -> type[Objective]:  # type: ignore[override]
        if not cls.name:
            raise ValueError(f"{cls.__name__} has no name")
        return super().register(cls.name, cls)

    def make(self, name: str, weight: float = 0.5) -> Objective:
        """An instance of the objective ``name`` with ``weight``."""
        return self.get(name)(weight)


OBJECTIVES = ObjectiveRegistry()
for _cls in (Cost, Speed, Balanced):
    OBJECTIVES.register(_cls)


def make_objective(name: str | Objective, weight: float = 0.5) -> Objective:
    """``name`` as an objective object (an object is returned as it is)."""
    return name if isinstance(name, Objective) else OBJECTIVES.make(name, weight)
