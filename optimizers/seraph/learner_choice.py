"""The learner's machine: part of the plan, chosen from the price table at the robust speed.

The learner VM is billed for the whole iteration (the update and the wait for the rollout
functions): 44-65% of a static run's modelled bill. Per iteration at a run shape, the
planner's models give the rollout phase on the Lambda clock (``rollout_s``, which no
learner machine changes) and the learner host's part (``host_s``: the update, batch
assembly and encoding, measured on this host at one thread; ``update_s`` of it is the
PPO update). On a candidate machine of single-thread speed ``v`` (its band's low end,
:mod:`serverless.learner_machines`) whose ``n`` vCPUs run the update ``x`` times faster
(the pilot's measured wall-time speed-up at the best thread count up to ``n``,
:class:`~serverless.learner_machines.ThreadScaling`) an iteration takes
``rollout_s + (host_s - update_s) / v + update_s / (v * x)`` and its learner costs that
time at the machine's price. The objective picks: least cost, least time, or the weighted
balance of the two against the reference machine at one thread. The reference machine
(the one ``rl train`` and the static default use) is counted at speed 1.0, as every run
has been; a candidate must win at its band's low end.

Only the update is credited with threads: batch assembly, GAE and encoding run on one
thread. The learner's network is small (64x64 MLPs on minibatches of 64), and on both
update engines a second thread costs more than it gives: on a loaded 2-core host the
2-thread speed-up measured 0.02-0.83x with the numpy engine and 0.02-0.13x with torch
(CartPole, Acrobot, Pendulum at their pilot batches; ``benchmarks/learner_threads.py``,
docs/seraph.md, "The learner's machine"), so a plan keeps the update at one thread and a
multi-vCPU machine is counted for its single-thread speed and its price. A host whose
update does gain from threads is credited with the gain it measured. The reference at its
second thread is a plan of its own (:attr:`LearnerChoice.changed`), scored against the
reference at one thread.
"""

from __future__ import annotations

from dataclasses import dataclass

from core.json_edge import JsonObject
from serverless.learner_machines import LearnerMachine, LearnerTable, ThreadScaling, load_learner_table


@dataclass(frozen=True)
class LearnerOption:
    """One machine's modelled iteration at the planned shape."""

    machine: LearnerMachine  # at its thread count (LearnerMachine.threads)
    speed: float  # the single-thread speed counted (the band's low end; 1.0 for the reference)
    iteration_s: float
    learner_usd: float  # the learner's cost of one iteration

    def to_dict(self) -> JsonObject:
        m = self.machine
        return {"instance_type": m.instance_type, "architecture": m.architecture, "vcpus": m.vcpus,
                "usd_per_hour": m.usd_per_hour, "speed_counted": self.speed, "speed_band": list(m.speed),
                "update_threads": m.threads, "update_speedup_counted": m.threads_speedup,
                "iteration_s": self.iteration_s, "learner_usd_per_iteration": self.learner_usd}


@dataclass(frozen=True)
class LearnerChoice:
    machine: LearnerMachine
    reference: LearnerMachine
    reason: str
    options: tuple[LearnerOption, ...]
    table_version: str
    scaling: ThreadScaling = ThreadScaling()

    @property
    def changed(self) -> bool:
        """Whether the run's learner differs from the reference at one thread (its type or threads)."""
        return self.machine != self.reference

    def threads_line(self) -> str:
        """The update's measured speed-ups and the threads the chosen machine runs, in one line."""
        ups = ", ".join(f"{t} thread{'s' if t > 1 else ''} {x:.2f}x" for t, x in self.scaling.speedups)
        return (f"update speed-up against one thread: {ups} ({self.scaling.label}); "
                f"{self.machine.instance_type} runs the update on {self.machine.threads} thread(s), "
                f"counted at {self.machine.threads_speedup:.2f}x")

    def to_dict(self) -> JsonObject:
        return {"instance_type": self.machine.instance_type, "architecture": self.machine.architecture,
                "update_threads": self.machine.threads, "update_speedup_counted": self.machine.threads_speedup,
                "reference": self.reference.instance_type, "reason": self.reason, "label": "modelled",
                **self.scaling.as_dict(), "price_table": self.table_version,
                "options": [o.to_dict() for o in self.options]}

    def tfvars(self) -> str:
        """The Terraform variable for ``infra/terraform/envs/dev``'s learner instance."""
        return f'learner_instance_type = "{self.machine.instance_type}"\n'


def choose_learner(objective: str, weight: float, rollout_s: float, host_s: float,
                   table: LearnerTable | None = None, *, update_s: float = 0.0,
                   scaling: ThreadScaling = ThreadScaling()) -> LearnerChoice:
    """The learner machine for an iteration of ``rollout_s`` on the functions and ``host_s``
    on this host, ``update_s`` of it the PPO update, with the update's measured thread
    ``scaling`` (see the module's docstring)."""
    table = table or load_learner_table()
    ref = table.reference
    update_s = min(max(update_s, 0.0), host_s)
    base = _option(ref, 1.0, rollout_s, host_s - update_s, update_s)  # the static default's learner
    options = [base]
    for m in table.machines:
        placed = scaling.place(m)
        if placed != base.machine:
            speed = 1.0 if m.instance_type == ref.instance_type else m.robust_speed
            options.append(_option(placed, speed, rollout_s, host_s - update_s, update_s))

    def score(o: LearnerOption) -> float:
        c, t = o.learner_usd / base.learner_usd, o.iteration_s / base.iteration_s
        return {"cost": c, "speed": t}.get(objective, weight * c + (1 - weight) * t)

    best = min(options, key=lambda o: (score(o), o is not base))
    if best is base:
        reason = f"the reference {ref.instance_type}: no candidate beats it for {objective} at its speed band's low end"
    else:
        m = best.machine
        threads = f" and the update's measured {m.threads_speedup:.2f}x at {m.threads} threads" if m.threads > 1 else ""
        reason = (f"{m.instance_type} ({m.architecture}, {m.vcpus} vCPU, ${m.usd_per_hour}/h, update on "
                  f"{m.threads} thread(s)): {score(best):.2f}x the reference {ref.instance_type} on {objective} per "
                  f"iteration, counted at speed {best.speed} (its band's low end){threads}")
    return LearnerChoice(best.machine, ref, reason, tuple(options), table.version, scaling)


def _option(m: LearnerMachine, speed: float, rollout_s: float, other_s: float, update_s: float) -> LearnerOption:
    t = rollout_s + m.host_s(update_s, other_s, base_speed=speed)
    return LearnerOption(m, speed, t, t * m.usd_per_hour / 3600.0)


def keep_reference(why: str, table: LearnerTable | None = None) -> LearnerChoice:
    """The reference machine, for a run the models cannot speak for (``why``)."""
    table = table or load_learner_table()
    return LearnerChoice(table.reference, table.reference, f"the reference {table.reference.instance_type}: {why}",
                         (), table.version)
