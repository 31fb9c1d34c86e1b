"""Heuristic baseline: "give every stage all the cores" (a common rule of thumb).

Every ``cpu`` knob at the node's vCPU count (or its largest allowed value below it),
every buffer and the cycle length at their largest value. The stages together ask for
more threads than the budget (oversubscription), so this configuration is outside the
knob space's CPU budget on purpose: it is what a user who ignores the budget writes.
"""

from __future__ import annotations

from ingestion.knobs import Config, KnobSpace
from optimizers.baselines._fixed import FixedConfigs


def heuristic_config(space: KnobSpace, vcpus: int) -> Config:
    config = {k.name: k.initial for k in space.knobs}
    for k in space.knobs:
        if k.kind == "cpu":
            config[k.name] = max([v for v in k.values if v <= vcpus] or [k.values[0]])
        elif k.kind in ("buffer", "other"):
            config[k.name] = k.values[-1]
    return config


def make_heuristic_optimizer(space: KnobSpace, vcpus: int) -> FixedConfigs:
    return FixedConfigs("heuristic", [heuristic_config(space, vcpus)])
