"""A model jump: where the re-fitted model says the best configuration is."""

from __future__ import annotations

from ingestion.measurement import Config
from ingestion.simulator import simulate
from optimizers.intune.env import STOP, Masker
from optimizers.intune.phases.model_fit import FLOOR
from optimizers.intune.state import SearchSetup, SearchState

#: A climb on the model stops when the next configuration gains less than this (a tie).
CLIMB_TIE = 1e-6


def model_jump(setup: SearchSetup, state: SearchState, best: Config | None) -> Config | None:
    """Climb from ``best`` (the best measured configuration) on the re-fitted model, each round to
    the best configuration within two moves (through the ``jump_width`` best single moves), for at
    most ``jump_rounds`` rounds; propose the end point if it is unmeasured and the model predicts
    it beats ``best`` by more than ``min_gain`` (at most ``max_jumps`` jumps, only with ``refit``)."""
    s = setup.settings
    if not s.refit or state.jumps >= s.max_jumps or best is None:
        return None
    cache: dict[tuple, float] = {}

    def predict(config: Config) -> float:
        key = Masker.key(config)
        if key not in cache:
            cache[key] = simulate(state.belief, config, setup.node).score
        return cache[key]

    def neighbourhood(config: Config) -> list[Config]:
        first = [c for i, c in enumerate(state.masker.targets(config)) if c is not None and i != STOP]
        first.sort(key=lambda c: -predict(c))
        out = list(first)
        for c in first[: s.jump_width]:
            out += [c2 for i, c2 in enumerate(state.masker.targets(c)) if c2 is not None and i != STOP]
        return out

    start_x = predict(best)
    current, current_x = best, start_x
    for _ in range(s.jump_rounds):
        candidates = neighbourhood(current)
        if not candidates:
            break
        nxt = max(candidates, key=predict)
        if predict(nxt) <= current_x * (1.0 + CLIMB_TIE):
            break
        current, current_x = nxt, predict(nxt)
    if Masker.key(current) in state.visited or current_x <= max(start_x, FLOOR) * (1.0 + s.min_gain):
        return None
    return current
