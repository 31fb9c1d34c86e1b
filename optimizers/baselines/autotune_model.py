"""A model of tf.data AUTOTUNE's HILL_CLIMB, run on the simulator (a *model*, not tf.data itself).

What it follows (tensorflow/core/framework/model.cc, as described in NOTES-related-work.md):
every tunable parameter starts at its minimum; each round increments the one parameter whose
increment most reduces the modelled output time; it stops when the output time falls below
``processing_time / cpu_budget``, when no parameter can grow, or when buffered memory would pass
the RAM budget. Tunable: every thread knob (parallelism, from 1, never inline) and every buffer
knob of a ``prefetch`` stage; other knobs (batch size, shuffle buffer) keep their defaults, as a
user would write them.

AUTOTUNE's own model of output time, simplified: each server (a parallel stage, or a run of
sequential stages) takes ``s / p`` per row (``s`` = its measured processing time per row, CPU
plus waiting, ``p`` its parallelism); asynchronous stages pipeline, so the output time is the
slowest server's, scaled by ``1 + 0.1 * sum_b 1 / (1 + b)`` for prefetch buffers ``b``. It does
not model cores being shared. Real tf.data lets each op's parallelism reach the CPU budget, so
the total may exceed it; this model is confined to the same knob space as every other optimizer
(an increment that would take the thread total over the space's CPU budget is not taken), so all
figures compare configurations of one space against one grid oracle. The processing
times are the pipeline's true ones (AUTOTUNE measures them at run time).
"""

from __future__ import annotations

from typing import TypedDict

from ingestion.knobs import Config, Knob, KnobSpace
from ingestion.node import Node
from ingestion.simulator import PipelineModel, memory_mb, servers
from optimizers.baselines._fixed import FixedConfigs

LABEL = "model of tf.data AUTOTUNE (HILL_CLIMB) on the simulator"


def _tunable(model: PipelineModel, space: KnobSpace) -> list[Knob]:
    prefetch = {s.buffer_knob for s in model.stages if s.buffer_knob and s.name == "prefetch"}
    return [k for k in space.knobs if k.kind == "cpu" or k.name in prefetch]


def modelled_output_time(model: PipelineModel, config: Config) -> float:
    worst = max((g.cpu_s + g.wait_s) / g.threads for g in servers(model, config))
    buffers = sum(1.0 / (1.0 + config[s.buffer_knob]) for s in model.stages if s.buffer_knob and s.name == "prefetch")
    return worst * (1.0 + 0.1 * buffers)


class HillClimbInfo(TypedDict):
    """How the AUTOTUNE model's hill climb ended: its rounds, why it stopped, its label."""

    rounds: int
    stopped_by: str
    label: str


def hill_climb(model: PipelineModel, space: KnobSpace, node: Node, max_rounds: int = 10_000) -> tuple[Config, HillClimbInfo]:
    tunable = _tunable(model, space)
    config = space.initial()
    for k in tunable:
        config[k.name] = min(v for v in k.values if v > 0 or k.kind != "cpu") if any(v > 0 for v in k.values) else k.values[0]
    processing = sum(g.cpu_s + g.wait_s for g in servers(model, config))
    budget = float(node.vcpus)
    rounds, stop = 0, "all parameters at maximum"
    while rounds < max_rounds:
        current = modelled_output_time(model, config)
        if current < processing / budget:
            stop = "output time below processing time / cpu budget"
            break
        best: tuple[float, Config] | None = None
        for k in tunable:
            up = k.step(config[k.name], 1)
            if up is None or (k.kind == "cpu" and up > budget):
                continue
            candidate = {**config, k.name: up}
            if space.cpu_used(candidate) > space.cpu_budget:
                continue
            if memory_mb(model, candidate)[0] > node.ram_budget_mb:
                continue
            t = modelled_output_time(model, candidate)
            if best is None or t < best[0]:
                best = (t, candidate)
        if best is None:
            break
        config = best[1]
        rounds += 1
    return config, {"rounds": rounds, "stopped_by": stop, "label": LABEL}


def make_autotune_model_optimizer(space: KnobSpace, node: Node, model: PipelineModel) -> FixedConfigs:
    """One-shot optimizer proposing the configuration the AUTOTUNE model settles on."""
    config, info = hill_climb(model, space, node)
    opt = FixedConfigs("autotune-model", [config])
    opt.info = info  # type: ignore[attr-defined]
    return opt
