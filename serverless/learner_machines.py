"""The machines the PPO learner may run on, with their prices and speed bands.

The learner runs one thread (``PPOConfig.torch_threads``) and is billed for the whole
iteration, waiting for the rollout functions included (``serverless.ledger``). Its machine
is therefore worth choosing: a one-vCPU machine costs half a two-vCPU one for the same
wait. The table (``data/learner_machines.json``) gives each candidate's price and its
single-thread speed relative to the host the learner is measured on, as a band; the bands
are assumptions, not measurements, so plans and the modelled clock count a machine at its
band's low end (a slower learner is never flattered). The reference machine is the one
``rl train`` prices and the static default keeps.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

from core.errors import UserError

TABLE_PATH = Path(__file__).parent / "data" / "learner_machines.json"


@dataclass(frozen=True)
class LearnerMachine:
    """One candidate: its type, architecture, vCPUs, price and speed band (low, high)."""

    instance_type: str
    architecture: str
    vcpus: int
    memory_gib: float
    usd_per_hour: float
    speed: tuple[float, float]

    @property
    def robust_speed(self) -> float:
        """The speed plans and the modelled clock count: the band's low end."""
        return self.speed[0]


@dataclass(frozen=True)
class LearnerTable:
    version: str
    region: str
    source: str
    reference: LearnerMachine
    machines: tuple[LearnerMachine, ...]

    def get(self, instance_type: str) -> LearnerMachine:
        for m in self.machines:
            if m.instance_type == instance_type:
                return m
        raise UserError(f"learner machine {instance_type!r} is not in the table; allowed: "
                        f"{', '.join(m.instance_type for m in self.machines)}")


def load_learner_table(path: Path = TABLE_PATH) -> LearnerTable:
    """Read the table; a malformed one is a UserError naming the file and the field."""
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
        machines = tuple(
            LearnerMachine(m["instance_type"], m["architecture"], int(m["vcpus"]), float(m["memory_gib"]),
                           float(m["usd_per_hour"]), (float(m["speed"][0]), float(m["speed"][1])))
            for m in data["machines"]
        )
        by_type = {m.instance_type: m for m in machines}
        table = LearnerTable(str(data["version"]), str(data["region"]), str(data["source"]),
                             by_type[data["reference"]], machines)
    except (OSError, ValueError, KeyError, TypeError, IndexError) as exc:
        raise UserError(f"{path}: not a learner machine table ({type(exc).__name__}: {exc})") from None
    for m in machines:
        lo, hi = m.speed
        if not (0 < lo <= hi) or m.usd_per_hour <= 0:
            raise UserError(f"{path}: {m.instance_type}: speed must be 0 < low <= high and the price positive")
    return table
