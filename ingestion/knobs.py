"""Knob spaces: what an ingestion optimizer may change in a pipeline.

A user's pipeline is a builder (knob configuration -> ``tf.data.Dataset``) plus a
:class:`KnobSpace`. Every ingestion optimizer (InTune, AUTOTUNE, the Plumber LP,
hill climbing, grid, Optuna) works on any such pair, not only the built-in DLRM
pipeline.

A configuration is a plain ``dict[str, int]`` from knob name to value. Knobs of
kind ``"cpu"`` are thread counts (a stage's parallelism); together they may not
exceed the space's ``cpu_budget`` (the node's cores given to the pipeline).
Nothing here imports TensorFlow.
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass, field
from typing import Iterator, Literal, Mapping

from core.errors import UserError

Config = dict[str, int]
KnobKind = Literal["cpu", "buffer", "batch", "other"]


def _is_int(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


@dataclass(frozen=True)
class Knob:
    """One tunable integer with an ordered list of allowed values.

    ``stage`` names the pipeline stage the knob belongs to (for per-stage reports
    and for the simulator). ``kind="cpu"`` knobs count against the CPU budget.
    ``limited_by`` (cpu knobs): another knob whose value caps the threads the stage really
    runs (tf.data's interleave reads at most ``cycle_length`` files at once); the simulator
    uses it, the CPU budget still counts the knob's own value.
    """

    name: str
    values: tuple[int, ...]
    kind: KnobKind = "other"
    stage: str | None = None
    default: int | None = None
    limited_by: str | None = None

    def __post_init__(self) -> None:
        if not isinstance(self.name, str) or not self.name:
            raise UserError(f"a knob's name must be a non-empty string, got {self.name!r}")
        if not isinstance(self.values, (tuple, list)) or not self.values:
            raise UserError(f"knob {self.name!r} has no allowed values (give a tuple of integers)")
        if not all(_is_int(v) for v in self.values):
            raise UserError(f"knob {self.name!r}: values must be integers, got {self.values!r}")
        if list(self.values) != sorted(set(self.values)):
            raise UserError(f"knob {self.name!r}: values must be strictly increasing, got {self.values}")
        if self.kind not in ("cpu", "buffer", "batch", "other"):
            raise UserError(f"knob {self.name!r}: kind {self.kind!r} is not one of cpu, buffer, batch, other")
        if self.default is not None and (not _is_int(self.default) or self.default not in self.values):
            raise UserError(f"knob {self.name!r}: default {self.default!r} not among {self.values}")
        object.__setattr__(self, "values", tuple(self.values))

    @property
    def initial(self) -> int:
        return self.default if self.default is not None else self.values[0]

    def step(self, value: int, direction: int) -> int | None:
        """The neighbouring allowed value (direction +1 or -1), or None at an end."""
        if value not in self.values:
            raise UserError(f"knob {self.name!r} = {value!r} is not allowed; allowed values: {list(self.values)}")
        i = self.values.index(value) + direction
        return self.values[i] if 0 <= i < len(self.values) else None


@dataclass(frozen=True)
class KnobSpace:
    """A set of knobs and the CPU budget their ``cpu`` knobs share."""

    knobs: tuple[Knob, ...]
    cpu_budget: int
    name: str = "pipeline"
    fixed: Mapping[str, int] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if not all(isinstance(k, Knob) for k in self.knobs):
            raise UserError(f"a knob space holds Knob objects, got {[type(k).__name__ for k in self.knobs]}")
        names = [k.name for k in self.knobs]
        if len(set(names)) != len(names):
            raise UserError(f"duplicate knob names in {names}")
        if not _is_int(self.cpu_budget) or self.cpu_budget < 1:
            raise UserError(f"cpu budget must be at least 1 thread, got {self.cpu_budget}")
        min_cpu = sum(k.values[0] for k in self.cpu_knobs)
        if min_cpu > self.cpu_budget:
            raise UserError(
                f"impossible CPU budget: the {len(self.cpu_knobs)} parallel stages need at least "
                f"{min_cpu} threads, the budget is {self.cpu_budget}"
            )

    # -- lookup ---------------------------------------------------------------
    @property
    def names(self) -> list[str]:
        return [k.name for k in self.knobs]

    @property
    def cpu_knobs(self) -> list[Knob]:
        return [k for k in self.knobs if k.kind == "cpu"]

    def knob(self, name: str) -> Knob:
        for k in self.knobs:
            if k.name == name:
                return k
        raise KeyError(name)

    # -- configurations -------------------------------------------------------
    def cpu_used(self, config: Mapping[str, int]) -> int:
        return sum(int(config[k.name]) for k in self.cpu_knobs)

    def is_valid(self, config: Mapping[str, int]) -> bool:
        try:
            self.validate(config)
        except UserError:
            return False
        return True

    def validate(self, config: Mapping[str, int]) -> Config:
        """Return ``config`` as a clean dict, or raise :class:`UserError` naming the bad knob."""
        unknown = sorted(set(config) - set(self.names) - set(self.fixed))
        if unknown:
            raise UserError(f"unknown knob(s) {unknown}; the knobs of {self.name} are {self.names}")
        clean: Config = {}
        for k in self.knobs:
            if k.name not in config:
                raise UserError(f"knob {k.name!r} is missing; allowed values: {list(k.values)}")
            v = config[k.name]
            if isinstance(v, bool) or not isinstance(v, int) or v not in k.values:
                raise UserError(f"knob {k.name!r} = {v!r} is not allowed; allowed values: {list(k.values)}")
            clean[k.name] = int(v)
        used = self.cpu_used(clean)
        if used > self.cpu_budget:
            raise UserError(f"configuration uses {used} threads, over the CPU budget of {self.cpu_budget}")
        return clean

    def initial(self) -> Config:
        """Every knob at its default (or smallest) value; always valid."""
        config = {k.name: k.initial for k in self.knobs}
        if self.cpu_used(config) > self.cpu_budget:
            config.update({k.name: k.values[0] for k in self.cpu_knobs})
        return config

    def neighbours(self, config: Mapping[str, int]) -> Iterator[Config]:
        """Valid configurations one step of one knob away."""
        for k in self.knobs:
            for direction in (-1, 1):
                v = k.step(int(config[k.name]), direction)
                if v is None:
                    continue
                candidate = {**config, k.name: v}
                if self.cpu_used(candidate) <= self.cpu_budget:
                    yield candidate

    def grid(self) -> Iterator[Config]:
        """Every valid configuration (the exhaustive grid); may be large."""
        for values in itertools.product(*(k.values for k in self.knobs)):
            config = dict(zip(self.names, values))
            if self.cpu_used(config) <= self.cpu_budget:
                yield config

    def grid_size(self) -> int:
        return sum(1 for _ in self.grid())
