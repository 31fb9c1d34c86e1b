"""Start: the model's best memory-safe configuration, and the near-tied CPU splits measured first."""

from __future__ import annotations

import math
from typing import Mapping

from ingestion.knobs import KnobSpace
from ingestion.measurement import Config
from ingestion.node import Node
from ingestion.simulator import PipelineModel, simulate
from optimizers.intune.env import STOP, Masker
from optimizers.intune.settings import InTuneSettings
from optimizers.intune.state import SearchSetup, SearchState


def model_best(
    model: PipelineModel, space: KnobSpace, node: Node, masker: Masker, *, exhaustive_limit: int = 4000
) -> tuple[Config, str]:
    """The model's best memory-safe configuration and how it was found: exhaustive search when
    the grid is small, otherwise steepest ascent over single moves from the initial configuration."""
    if space.grid_size() <= exhaustive_limit:
        best, best_x = space.initial(), -math.inf
        for config in space.grid():
            if not masker.safe(config):
                continue
            x = simulate(model, config, node).score
            if x > best_x:
                best, best_x = config, x
        return best, "exhaustive search on the calibrated simulator"
    current = space.initial()
    current_x = simulate(model, current, node).score
    while True:
        scored = [(simulate(model, c, node).score, c) for i, c in enumerate(masker.targets(current))
                  if c is not None and i != STOP]
        if not scored:
            break
        x, c = max(scored, key=lambda xc: xc[0])
        if x <= current_x:
            break
        current, current_x = c, x
    return current, "steepest ascent on the calibrated simulator"


def cpu_split(space: KnobSpace, config: Mapping[str, int]) -> tuple:
    """A configuration's CPU split: the values of its CPU knobs."""
    return tuple(config[k.name] for k in space.cpu_knobs)


def start_candidates(
    model: PipelineModel, space: KnobSpace, node: Node, masker: Masker, settings: InTuneSettings = InTuneSettings(),
) -> list[Config]:
    """The model's best memory-safe configuration of each distinct CPU split, best first, those it
    predicts within ``start_band`` of its overall best, at most ``start_splits`` (empty for a grid
    larger than ``exhaustive_limit``)."""
    if space.grid_size() > settings.exhaustive_limit:
        return []
    scored = sorted(((simulate(model, c, node).score, c) for c in space.grid() if masker.safe(c)),
                    key=lambda xc: -xc[0])
    if not scored:
        return []
    floor = scored[0][0] * (1.0 - settings.start_band)
    chosen: dict[tuple, Config] = {}
    for x, c in scored:
        if x < floor or len(chosen) >= settings.start_splits:
            break
        chosen.setdefault(cpu_split(space, c), c)
    return list(chosen.values())


def choose_start(
    model: PipelineModel, space: KnobSpace, node: Node, masker: Masker, settings: InTuneSettings
) -> tuple[Config, str, list[Config]]:
    """The start, how it was found, and the other near-tied CPU splits to measure right after it.
    One exhaustive pass on a small grid gives the model's best (first) and the near-tied splits; a
    large grid has none and climbs to the model's best instead."""
    candidates = start_candidates(model, space, node, masker, settings)
    if candidates:
        return candidates[0], "exhaustive search on the calibrated simulator", candidates[1:]
    best, source = model_best(model, space, node, masker, exhaustive_limit=settings.exhaustive_limit)
    return best, source, []


def next_start(setup: SearchSetup, state: SearchState) -> Config | None:
    """Where to start: the model's best, its near-tied alternatives, then (when those failed)
    the model's best of what the masks still allow, then the space's initial configuration, then
    the first unmeasured configuration within ``start_fallback_depth`` moves of the start."""
    from optimizers.intune.phases.escape import within_moves

    def fresh(c: Config) -> bool:
        return Masker.key(c) not in state.visited and state.masker.safe(c)

    for c in (state.start, *state.start_queue):
        if fresh(c):
            return dict(c)
    best, _ = model_best(state.belief, setup.space, setup.node, state.masker,
                         exhaustive_limit=setup.settings.exhaustive_limit)
    if fresh(best):
        return best
    if fresh(setup.space.initial()):
        return setup.space.initial()
    near = [c for c in within_moves(state.masker, state.start, setup.settings.start_fallback_depth)
            if Masker.key(c) not in state.visited]
    return near[0] if near else None
