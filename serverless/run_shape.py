"""The run shape: what a run trains at, and what a tuner may change between iterations.

One frozen value, :class:`RunShape`: ``actors`` rollout functions of ``memory_mb`` each,
``batch`` env steps per iteration split over them, and the rollout layout ``steps_per_env``
(env slots of about that many steps, :mod:`serverless.slots`). The trainer runs at one
(``TrainSpec.run``, each ``IterationRecord.run``), Seraph's search space is a set of them,
a baseline is one with its layout set, and the results write them with :meth:`RunShape.to_dict`.

``steps_per_env`` is ``None`` for the run's PPO config's layout (``PPOConfig.steps_per_env``,
which the run starts with), 0 for one env per function (no slots), N > 0 for env slots of
about N steps. It takes part in equality and hashing: the search space's points all leave it
``None`` (a candidate carries its layout beside its point, :meth:`RunShape.without_layout`),
so they key dicts and compare as three numbers do, and a run whose layout changed has
changed shape. ``to_dict`` leaves a ``None`` layout out, so a point is written as the three
numbers it always was.

A wrong field raises :class:`RunShapeError` when the shape is made, naming the field:
``actors: must be a whole number >= 1, got 0``.
"""

from __future__ import annotations

import math
import numbers
from dataclasses import asdict, dataclass, replace
from typing import Mapping

from core.errors import UserError
from serverless.invocation import LAMBDA_MAX_MEMORY_MB, LAMBDA_MIN_MEMORY_MB

#: A shape's defaults; the env presets (``serverless.presets``) share the actors and memory.
DEFAULT_ACTORS = 4
DEFAULT_MEMORY_MB = 1769  # one full vCPU
DEFAULT_BATCH = 256
#: The keys of the text form (``actors=A,memory=M,batch=B[,steps_per_env=N]``) and the field each sets.
TEXT_KEYS = {"actors": "actors", "memory": "memory_mb", "memory_mb": "memory_mb", "batch": "batch",
             "steps_per_env": "steps_per_env"}


class RunShapeError(UserError):
    """A run shape's field that is wrong: ``field`` and what is allowed."""

    def __init__(self, field: str, problem: str) -> None:
        self.field = field
        super().__init__(f"{field}: {problem}")


def _whole(field: str, value: object, least: int, allowed: str | None = None) -> int:
    """``value`` as an int (numpy's integers too), else a :class:`RunShapeError` on ``field``."""
    if type(value) is int and value >= least:  # the common case, without the ABC check
        return value
    if isinstance(value, bool) or not isinstance(value, numbers.Integral) or value < least:
        raise RunShapeError(field, f"must be {allowed or f'a whole number >= {least}'}, got {value!r}")
    return int(value)


@dataclass(frozen=True)
class RunShape:
    """Actor functions, their memory, env steps per iteration and the rollout layout (see the module)."""

    actors: int = DEFAULT_ACTORS
    memory_mb: int = DEFAULT_MEMORY_MB
    batch: int = DEFAULT_BATCH  # env steps per iteration, split over the actors
    steps_per_env: int | None = None  # None: the PPO config's layout; 0: one env per function

    def __post_init__(self) -> None:
        actors = _whole("actors", self.actors, 1)
        memory = _whole("memory_mb", self.memory_mb, 1)
        if not LAMBDA_MIN_MEMORY_MB <= memory <= LAMBDA_MAX_MEMORY_MB:
            raise RunShapeError(
                "memory_mb", f"must be {LAMBDA_MIN_MEMORY_MB}-{LAMBDA_MAX_MEMORY_MB} MB (Lambda's range), got {memory}"
            )
        batch = _whole("batch", self.batch, actors, f"a whole number >= actors ({actors}): every function needs "
                       "at least one env step")
        spe = self.steps_per_env
        if spe is not None:
            spe = _whole("steps_per_env", spe, 0, "None (the PPO config's layout) or a whole number >= 0 (0: one "
                         "env per function)")
        for name, value in (("actors", actors), ("memory_mb", memory), ("batch", batch), ("steps_per_env", spe)):
            object.__setattr__(self, name, value)

    @property
    def steps_per_actor(self) -> int:
        """The longest fragment: env steps of the busiest function per iteration."""
        return math.ceil(self.batch / self.actors)

    def fragments(self) -> list[int]:
        """Env steps per function: ``batch / actors``, the remainder spread over the first."""
        base, extra = divmod(self.batch, self.actors)
        return [base + (1 if i < extra else 0) for i in range(self.actors)]

    @property
    def layout(self) -> tuple[int, int | None]:
        """(batch, steps per env): what PPO learns from, whatever the function count."""
        return self.batch, self.steps_per_env

    def without_layout(self) -> "RunShape":
        """The search-space point: this shape at the PPO config's layout (``steps_per_env`` None)."""
        return self if self.steps_per_env is None else replace(self, steps_per_env=None)

    def one_env_per_function(self) -> "RunShape":
        """This shape with the layout ``batch // actors``: one env per function, the steps a run
        takes without slots."""
        return replace(self, steps_per_env=self.batch // self.actors)

    def check_layout(self) -> "RunShape":
        """This shape, its layout set and run by every function: 1 to ``batch // actors`` steps per env."""
        most, spe = self.batch // self.actors, self.steps_per_env
        if spe is None or not 1 <= spe <= most:
            raise RunShapeError("steps_per_env", f"must be 1 to batch / actors = {most}, so every function runs an "
                                f"env, got {spe!r}")
        return self

    def to_dict(self) -> dict[str, int]:
        """The JSON form; a ``None`` layout (the PPO config's) is left out."""
        data = asdict(self)
        if self.steps_per_env is None:
            del data["steps_per_env"]
        return data

    @classmethod
    def from_dict(cls, data: Mapping[str, int]) -> "RunShape":
        """From :meth:`to_dict`'s form (a saved profile, history, checkpoint or result)."""
        return cls(**data)

    def describe(self) -> str:
        """The text form :meth:`parse` reads."""
        text = f"actors={self.actors},memory={self.memory_mb},batch={self.batch}"
        return text if self.steps_per_env is None else f"{text},steps_per_env={self.steps_per_env}"

    @classmethod
    def parse(cls, text: str) -> "RunShape":
        """``actors=A,memory=M,batch=B[,steps_per_env=N]`` (``memory_mb`` also); errors name the key at fault."""
        values: dict[str, int] = {}
        for part in (p.strip() for p in str(text).split(",")):
            if not part:
                continue
            key, sep, raw = (s.strip() for s in part.partition("="))
            if not sep or key not in TEXT_KEYS:
                raise RunShapeError(
                    key or part, f"unknown key in {text!r}; allowed: actors, memory, batch, steps_per_env (key=value, "
                    "comma-separated)"
                )
            try:
                values[TEXT_KEYS[key]] = int(raw)
            except ValueError:
                raise RunShapeError(TEXT_KEYS[key], f"must be a whole number, got {raw!r}") from None
        missing = [k for k in ("actors", "memory_mb", "batch") if k not in values]
        if missing:
            raise RunShapeError(missing[0], f"missing in {text!r}; needed: actors, memory, batch")
        return cls(**values)
