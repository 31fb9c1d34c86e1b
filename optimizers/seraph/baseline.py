"""The configuration a user would run without Seraph: the baseline it must never lose to.

A baseline is a run shape plus its rollout layout: ``actors`` functions of ``memory_mb``,
``batch`` env steps per iteration, each env stepping ``steps_per_env`` steps per iteration
(env slots, ``PPOConfig.steps_per_env``). The static default is RLlib's PPO defaults as
functions: 2 runners of one env each, 4,000 steps per batch, so 2 envs of 2,000 steps
(``num_env_runners=2``, ``train_batch_size=4000``, ``num_envs_per_env_runner=1``). One env
per function is the layout ``steps_per_env = batch / actors``, and with env slots of that
length the trainer takes exactly the steps it takes without slots (the same env seeds and
segments; checked on CartPole-v1 and LunarLander-v3, seed 0), so any function count up to
``batch // steps_per_env`` trains the baseline's own trajectory.

``--baseline-config actors=2,memory=1769,batch=4000,steps_per_env=2000`` (CLI) or
``rl.baseline_config`` (workload YAML) names another one; ``steps_per_env`` may be left
out (one env per function).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from core.errors import UserError

if TYPE_CHECKING:  # the models load numpy and scipy; the request (and so the CLI's help) imports this module
    from optimizers.seraph.models import RunShape

#: Lambda's memory range (AWS Lambda docs): 128 MB to 10,240 MB.
MEMORY_RANGE_MB = (128, 10240)
#: The keys of the text form and the field each sets.
KEYS = {"actors": "actors", "memory": "memory_mb", "memory_mb": "memory_mb", "batch": "batch", "steps_per_env": "steps_per_env"}


class BaselineConfigError(UserError):
    """A baseline configuration field that is wrong: ``field`` and what is allowed."""

    def __init__(self, field: str, problem: str) -> None:
        self.field = field
        super().__init__(f"{field}: {problem}")


@dataclass(frozen=True)
class BaselineConfig:
    """A run shape and its rollout layout (see the module's docstring)."""

    actors: int
    memory_mb: int
    batch: int
    steps_per_env: int

    def __post_init__(self) -> None:
        for name in ("actors", "memory_mb", "batch", "steps_per_env"):
            v = getattr(self, name)
            if isinstance(v, bool) or not isinstance(v, int) or v < 1:
                raise BaselineConfigError(name, f"must be a whole number >= 1, got {v!r}")
        lo, hi = MEMORY_RANGE_MB
        if not lo <= self.memory_mb <= hi:
            raise BaselineConfigError("memory_mb", f"must be {lo}-{hi} MB (Lambda's range), got {self.memory_mb}")
        if self.steps_per_env > self.batch // self.actors:
            raise BaselineConfigError(
                "steps_per_env",
                f"must be at most batch / actors = {self.batch // self.actors}, so every function runs an env, "
                f"got {self.steps_per_env}",
            )

    @property
    def shape(self) -> RunShape:
        from optimizers.seraph.models import RunShape

        return RunShape(self.actors, self.memory_mb, self.batch)

    @property
    def layout(self) -> tuple[int, int]:
        """(batch, steps per env): what PPO learns from, whatever the function count."""
        return self.batch, self.steps_per_env

    def as_dict(self) -> dict[str, int]:
        return {"actors": self.actors, "memory_mb": self.memory_mb, "batch": self.batch, "steps_per_env": self.steps_per_env}

    def describe(self) -> str:
        return f"actors={self.actors},memory={self.memory_mb},batch={self.batch},steps_per_env={self.steps_per_env}"

    @classmethod
    def one_env_per_function(cls, shape: RunShape) -> "BaselineConfig":
        return cls(shape.actors, shape.memory_mb, shape.batch, shape.batch // shape.actors)

    @classmethod
    def parse(cls, text: str) -> "BaselineConfig":
        """``actors=A,memory=M,batch=B[,steps_per_env=N]``; errors name the key at fault."""
        values: dict[str, int] = {}
        for part in (p.strip() for p in str(text).split(",")):
            if not part:
                continue
            key, sep, raw = (s.strip() for s in part.partition("="))
            if not sep or key not in KEYS:
                raise BaselineConfigError(
                    key or part, f"unknown key in {text!r}; allowed: actors, memory, batch, steps_per_env (key=value, comma-separated)"
                )
            try:
                values[KEYS[key]] = int(raw)
            except ValueError:
                raise BaselineConfigError(KEYS[key], f"must be a whole number, got {raw!r}") from None
        missing = [k for k in ("actors", "memory_mb", "batch") if k not in values]
        if missing:
            raise BaselineConfigError(missing[0], f"missing in {text!r}; needed: actors, memory, batch")
        if "steps_per_env" not in values:  # one env per function
            values["steps_per_env"] = max(values["batch"] // max(values["actors"], 1), 1)
        return cls(**values)


#: RLlib's PPO defaults as functions (``optimizers.rl_baselines.static``): 2 x 1,769 MB, batch
#: 4,000, one env per function.
STATIC_DEFAULT_CONFIG = BaselineConfig(actors=2, memory_mb=1769, batch=4000, steps_per_env=2000)
