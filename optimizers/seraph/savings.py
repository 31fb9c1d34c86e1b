"""Where a run's saving against a baseline run comes from: env steps, functions, learner, tuning.

A run's bill is ``E (f + l) + o``: ``E`` env steps to the target, ``f`` the functions' cost per
env step (GB-seconds and requests: the layout and the memory size), ``l`` the learner machine's
cost per env step, ``o`` what tuning paid outside the training ledger (the memory probe, the
learner timing, planning). Against a baseline run ``E0 (f0 + l0)`` the difference splits
exactly into

* **env steps**: ``(E - E0) (f0 + l0)``, fewer (or more) steps at the baseline's rates;
* **functions**: ``E (f - f0)``, the layout's and memory size's cost per step;
* **learner**: ``E (l - l0)``, the learner machine's (its price and the time it waits);
* **tuning**: ``o - o0``.

Each part is in dollars (negative: a saving); they add up to the difference of the two bills.
"""

from __future__ import annotations

from dataclasses import dataclass
from core.json_edge import JsonObject

#: The ledger's components, by the part of the bill they belong to.
FUNCTIONS = ("function_gb_s", "requests", "faults")
LEARNER = ("learner_vm",)


@dataclass(frozen=True)
class Bill:
    """A run's bill by part (see the module's docstring)."""

    env_steps: int
    functions_usd: float
    learner_usd: float
    tuning_usd: float

    @property
    def total_usd(self) -> float:
        return self.functions_usd + self.learner_usd + self.tuning_usd

    @classmethod
    def of_result(cls, result: JsonObject) -> "Bill":
        """From a result JSON: ``rl tune``'s (``achieved`` and ``training.ledger``) or ``rl train``'s."""
        ledger = (result.get("training") or {}).get("ledger") or result["ledger"]
        parts = {line["component"]: float(line["usd"]) for line in ledger["lines"]}
        achieved = result.get("achieved") or result
        functions = sum(v for k, v in parts.items() if k in FUNCTIONS)
        learner = sum(v for k, v in parts.items() if k in LEARNER)
        return cls(int(achieved["env_steps"]), functions, learner, float(achieved["cost_usd"]) - functions - learner)


@dataclass(frozen=True)
class SavingSplit:
    """A run's bill minus a baseline run's, by source (dollars; negative is a saving)."""

    env_steps_usd: float
    functions_usd: float
    learner_usd: float
    tuning_usd: float

    @property
    def total_usd(self) -> float:
        return self.env_steps_usd + self.functions_usd + self.learner_usd + self.tuning_usd

    def __add__(self, other: "SavingSplit") -> "SavingSplit":
        return SavingSplit(self.env_steps_usd + other.env_steps_usd, self.functions_usd + other.functions_usd,
                           self.learner_usd + other.learner_usd, self.tuning_usd + other.tuning_usd)

    def to_dict(self) -> dict[str, float]:
        return {"env_steps_usd": self.env_steps_usd, "functions_usd": self.functions_usd,
                "learner_usd": self.learner_usd, "tuning_usd": self.tuning_usd, "total_usd": self.total_usd}


def split_saving(run: Bill, base: Bill) -> SavingSplit:
    """``run`` minus ``base``, by source (see the module's docstring)."""
    f0, l0 = base.functions_usd / base.env_steps, base.learner_usd / base.env_steps
    f, lr = run.functions_usd / run.env_steps, run.learner_usd / run.env_steps
    return SavingSplit(
        env_steps_usd=(run.env_steps - base.env_steps) * (f0 + l0),
        functions_usd=run.env_steps * (f - f0),
        learner_usd=run.env_steps * (lr - l0),
        tuning_usd=run.tuning_usd - base.tuning_usd,
    )
