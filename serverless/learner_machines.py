"""The machines the PPO learner may run on, with their prices, speed bands and thread counts.

The learner is billed for the whole iteration, waiting for the rollout functions included
(``serverless.ledger``). Its machine is therefore worth choosing: a one-vCPU machine costs
half a two-vCPU one for the same wait. The table (``data/learner_machines.json``) gives
each candidate's price and its single-thread speed relative to the host the learner is
measured on, as a band; the bands are assumptions, not measurements, so plans and the
modelled clock count a machine at its band's low end (a slower learner is never
flattered). The reference machine is the one ``rl train`` prices and the static default
keeps, at one thread and speed 1.0.

A machine's other vCPUs help only the PPO update, and only as much as the update's
measured wall-time speed-up at that many threads (:class:`ThreadScaling`, measured by the
pilot): a machine of ``n`` vCPUs runs the update at the thread count ``k <= n`` with the
best measured speed-up (one thread, speed-up 1.0, when more threads are slower), and a
thread count above the most the pilot's host could measure is counted at that most's
speed-up (a 4-vCPU machine measured on a 2-CPU host counts the 2-thread speed-up). The
rest of the learner host's work (batch assembly, GAE, encoding) runs on one thread.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Mapping, TypedDict

from core.errors import UserError
from core.json_edge import JsonObject

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
    threads: int = 1  # the PPO update's threads on this machine (ThreadScaling.place)
    threads_speedup: float = 1.0  # the update's measured wall-time speed-up at ``threads``

    @property
    def robust_speed(self) -> float:
        """The single-thread speed plans and the modelled clock count: the band's low end."""
        return self.speed[0]

    def host_s(self, update_s: float, other_s: float, *, base_speed: float) -> float:
        """The learner host's part of an iteration on this machine: ``other_s`` (one thread)
        at ``base_speed`` and the update's ``update_s`` also sped up by its threads (both
        measured on the host at one thread). ``base_speed``: 1.0 for the reference, else
        :attr:`robust_speed`."""
        return other_s / base_speed + update_s / (base_speed * self.threads_speedup)


class ThreadScalingJson(TypedDict):
    """A :class:`ThreadScaling` as a profile's learner timing holds it (thread count as a JSON key)."""

    threads_speedup: dict[str, float]
    threads_label: str


@dataclass(frozen=True)
class ThreadScaling:
    """The PPO update's measured wall-time speed-up at each thread count against one thread
    (``speedups``: (threads, speed-up) pairs, one thread at 1.0 always there) and how it was
    measured. The default measures nothing: one thread, speed-up 1.0."""

    speedups: tuple[tuple[int, float], ...] = ((1, 1.0),)
    label: str = "not measured: one thread counted"

    def best(self, vcpus: int) -> tuple[int, float]:
        """The thread count to run on a machine of ``vcpus`` and the speed-up counted: the
        measured count up to ``vcpus`` with the highest speed-up (the fewest threads on a tie)."""
        usable = [(t, s) for t, s in self.speedups if t <= max(1, vcpus)]
        return max(usable, key=lambda ts: (ts[1], -ts[0]))

    def place(self, machine: LearnerMachine) -> LearnerMachine:
        """``machine`` at its best thread count (:meth:`best`)."""
        threads, speedup = self.best(machine.vcpus)
        return replace(machine, threads=threads, threads_speedup=speedup)

    def as_dict(self) -> ThreadScalingJson:
        return {"threads_speedup": {str(t): s for t, s in self.speedups}, "threads_label": self.label}

    @classmethod
    def from_dict(cls, d: JsonObject) -> "ThreadScaling":
        """From :meth:`as_dict`'s keys; without ``threads_speedup`` (a profile from before it
        was measured) one thread at 1.0. A malformed entry is a ValueError."""
        raw = d.get("threads_speedup")
        if raw is None:
            return cls()
        if not isinstance(raw, Mapping):
            raise ValueError(f"threads_speedup must map thread counts to speed-ups, got {raw!r}")
        pairs = {int(t): float(s) for t, s in raw.items()}
        if pairs.get(1) != 1.0 or not all(t >= 1 and 0 < s < float("inf") for t, s in pairs.items()):
            raise ValueError(f"threads_speedup must hold 1: 1.0 and positive finite speed-ups, got {raw!r}")
        return cls(tuple(sorted(pairs.items())), str(d.get("threads_label", "")))


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
