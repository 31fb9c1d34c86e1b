"""One live step: expand the best measured configuration by the move the agent plus the model
rank first, and fine-tune the agent on what that move measured."""

from __future__ import annotations

import math
from typing import Mapping

import numpy as np

from ingestion.measurement import Config, Measurement
from ingestion.simulator import simulate
from optimizers.intune.env import ACTIONS, RESIDUAL_CLIP, STOP, apply_action, observe
from optimizers.intune.phases.model_fit import FLOOR
from optimizers.intune.state import SearchSetup, SearchState

#: Why a step ends the search: the agent ranked "stop" first, or no move is left.
AGENT_STOP = "agent chose stop"
NO_MOVE_LEFT = "no valid unmeasured neighbour left"


def observation(setup: SearchSetup, state: SearchState, config: Mapping[str, int], m: Measurement,
                improved: bool) -> np.ndarray:
    """The agent's observation of ``config`` measured as ``m``."""
    best = max((v.rows_per_s for v in state.visited.values()), default=m.rows_per_s)
    return observe(setup.space, setup.node, state.belief, config, m, start_rows_per_s=state.start_x,
                   best_rows_per_s=max(best, FLOOR), progress=state.steps / setup.settings.max_steps,
                   improved=improved)


def rank_moves(setup: SearchSetup, state: SearchState, base: Config, obs: np.ndarray, mask: np.ndarray) -> list[int]:
    """Valid actions, best first: the agent's Q-value plus ``model_weight`` times the model's
    predicted log gain of the step (both are in log-throughput units)."""
    s = setup.settings
    q = setup.agent.q_values(obs) if s.use_agent else np.zeros(len(ACTIONS), dtype=np.float32)
    valid = np.flatnonzero(mask)
    if s.model_weight:
        base_x = max(simulate(state.belief, base, setup.node).rows_per_s, FLOOR)
        for a in valid:
            if a == STOP:
                continue
            target = apply_action(setup.space, base, ACTIONS[a])
            assert target is not None
            q[a] += s.model_weight * math.log(max(simulate(state.belief, target, setup.node).rows_per_s, FLOOR) / base_x)
    return [int(a) for a in valid[np.argsort(-q[valid], kind="stable")]]


def best_first_step(setup: SearchSetup, state: SearchState) -> Config | str:
    """Expand the best measured configuration that still has untried moves (fewer than
    ``branch``): its top-ranked move, kept pending for the agent's fine-tuning. A reason to stop
    instead (a string) when the agent ranks "stop" first on the best after ``agent_stop_share``
    of ``patience`` steps without a gain, or when no configuration has a move left."""
    s = setup.settings
    for rank, (key, m) in enumerate(state.ranked()):
        if state.expanded.get(key, 0) >= s.branch:
            continue
        base = dict(key)
        obs = observation(setup, state, base, m, improved=state.no_improve == 0)
        ranked = rank_moves(setup, state, base, obs, state.masker.mask(base, exclude=state.visited.keys()))
        moves = [a for a in ranked if a != STOP]
        if s.use_agent and rank == 0 and ranked[0] == STOP and state.no_improve >= int(s.patience * s.agent_stop_share):
            return AGENT_STOP
        if not moves:
            state.expanded[key] = s.branch
            continue
        state.expanded[key] = state.expanded.get(key, 0) + 1
        target = apply_action(setup.space, base, ACTIONS[moves[0]])
        assert target is not None
        state.pending = (obs, moves[0], m, base)
        return target
    return NO_MOVE_LEFT


def finetune(setup: SearchSetup, state: SearchState, config: Config, measurement: Measurement) -> None:
    """The pending move's transition into the agent's replay buffer, its reward the residual
    (measured log gain minus the model's predicted one, as in pre-training), and
    ``finetune_steps`` gradient steps (only when the agent is used)."""
    assert state.pending is not None
    obs, action, base_m, base = state.pending
    state.pending = None
    s = setup.settings
    if not s.use_agent:
        return
    base_x = max(base_m.rows_per_s, FLOOR)
    predicted = math.log(max(simulate(state.belief, config, setup.node).rows_per_s, FLOOR)
                         / max(simulate(state.belief, base, setup.node).rows_per_s, FLOOR))
    actual = -RESIDUAL_CLIP if measurement.failed else math.log(max(measurement.rows_per_s, FLOOR) / base_x)
    reward = float(np.clip(actual - predicted, -RESIDUAL_CLIP, RESIDUAL_CLIP))
    next_mask = np.eye(len(ACTIONS), dtype=bool)[STOP]
    setup.agent.remember(obs, action, reward, obs, True, next_mask)
    if s.finetune_steps:
        setup.agent.learn(s.finetune_steps, min_size=s.finetune_min_replay)
