"""The learner's machine: part of the plan, chosen from the price table at the robust speed.

The learner VM is billed for the whole iteration (the update and the wait for the rollout
functions): 44-65% of a static run's modelled bill. Per iteration at a run shape, the
planner's models give the rollout phase on the Lambda clock (``rollout_s``, which no
learner machine changes) and the learner host's part (``host_s``: the update, batch
assembly and encoding, measured on this host). On a candidate machine of speed ``v`` (its
band's low end, :mod:`serverless.learner_machines`) an iteration takes
``rollout_s + host_s / v`` and its learner costs that time at the machine's price. The
objective picks: least cost, least time, or the weighted balance of the two against the
reference machine. The reference machine (the one ``rl train`` and the static default use)
is counted at speed 1.0, as every run has been; a candidate must win at its band's low end.

The learner runs one thread, and the modelled clock counts one thread's CPU time, so a
second vCPU is not credited with a faster update here (a two-thread update is not measured
on the modelled clock); two-vCPU candidates are in the table for their price only.
"""

from __future__ import annotations

from dataclasses import dataclass

from core.json_edge import JsonObject
from serverless.learner_machines import LearnerMachine, LearnerTable, load_learner_table


@dataclass(frozen=True)
class LearnerOption:
    """One machine's modelled iteration at the planned shape."""

    machine: LearnerMachine
    speed: float  # the speed counted (the band's low end; 1.0 for the reference)
    iteration_s: float
    learner_usd: float  # the learner's cost of one iteration

    def to_dict(self) -> JsonObject:
        m = self.machine
        return {"instance_type": m.instance_type, "architecture": m.architecture, "vcpus": m.vcpus,
                "usd_per_hour": m.usd_per_hour, "speed_counted": self.speed, "speed_band": list(m.speed),
                "iteration_s": self.iteration_s, "learner_usd_per_iteration": self.learner_usd}


@dataclass(frozen=True)
class LearnerChoice:
    machine: LearnerMachine
    reference: LearnerMachine
    reason: str
    options: tuple[LearnerOption, ...]
    table_version: str

    @property
    def changed(self) -> bool:
        return self.machine.instance_type != self.reference.instance_type

    def to_dict(self) -> JsonObject:
        return {"instance_type": self.machine.instance_type, "architecture": self.machine.architecture,
                "reference": self.reference.instance_type, "reason": self.reason, "label": "modelled",
                "price_table": self.table_version, "options": [o.to_dict() for o in self.options]}

    def tfvars(self) -> str:
        """The Terraform variable for ``infra/terraform/envs/dev``'s learner instance."""
        return f'learner_instance_type = "{self.machine.instance_type}"\n'


def choose_learner(objective: str, weight: float, rollout_s: float, host_s: float,
                   table: LearnerTable | None = None) -> LearnerChoice:
    """The learner machine for an iteration of ``rollout_s`` on the functions and ``host_s``
    on this host (see the module's docstring)."""
    table = table or load_learner_table()
    ref = table.reference
    options = []
    for m in table.machines:
        speed = 1.0 if m is ref else m.robust_speed
        t = rollout_s + host_s / speed
        options.append(LearnerOption(m, speed, t, t * m.usd_per_hour / 3600.0))
    base = next(o for o in options if o.machine is ref)

    def score(o: LearnerOption) -> float:
        c, t = o.learner_usd / base.learner_usd, o.iteration_s / base.iteration_s
        return {"cost": c, "speed": t}.get(objective, weight * c + (1 - weight) * t)

    best = min(options, key=lambda o: (score(o), o.machine is not ref))
    if best is base:
        reason = f"the reference {ref.instance_type}: no candidate beats it for {objective} at its speed band's low end"
    else:
        reason = (f"{best.machine.instance_type} ({best.machine.architecture}, {best.machine.vcpus} vCPU, "
                  f"${best.machine.usd_per_hour}/h): {score(best):.2f}x the reference {ref.instance_type} on "
                  f"{objective} per iteration, counted at speed {best.speed} (its band's low end)")
    return LearnerChoice(best.machine, ref, reason, tuple(options), table.version)


def keep_reference(why: str, table: LearnerTable | None = None) -> LearnerChoice:
    """The reference machine, for a run the models cannot speak for (``why``)."""
    table = table or load_learner_table()
    return LearnerChoice(table.reference, table.reference, f"the reference {table.reference.instance_type}: {why}",
                         (), table.version)
