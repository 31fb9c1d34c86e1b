"""The end of a search: confirm the best candidates, settle a near-tie, pick the recommendation.

The confirmation measures its candidates back to back, so those measurements are paired in time
(a drift of the machine hits them alike), while a search measurement of the same configuration
may be minutes older and was selected for being high. Once two or more candidates have
confirmation measurements, the recommendation is the best by the mean of those paired
measurements only. A near-tie of the two best is settled by measuring both once more, each round
in the order opposite to the one before (A, B, ... B, A: a linear drift cancels).
"""

from __future__ import annotations

from typing import Callable

import numpy as np

from ingestion.measurement import Config, Measurement
from optimizers.intune.env import Masker
from optimizers.intune.phases.start import cpu_split
from optimizers.intune.state import SearchSetup, SearchState

#: A settle round measures the two finalists once more each.
SETTLE_PAIR = 2


def confirm_candidates(setup: SearchSetup, state: SearchState, best_x: float) -> list[Config]:
    """What the confirmation measures again, best first: the ``confirm_top`` best configurations
    that measured within ``confirm_band`` of ``best_x``; if those share one CPU split, also the
    best configuration of another split that measured within ``confirm_split_band``. Which split
    wins is the decision that moves throughput most; a split that measured 10-25% lower in one
    search measurement may still be the better one (a measurement moves about 10%)."""
    s = setup.settings
    ranked = state.ranked()
    floor = best_x * (1.0 - s.confirm_band)
    keys = [k for k, m in ranked[: s.confirm_top] if m.rows_per_s >= floor]
    splits = {cpu_split(setup.space, dict(k)) for k in keys}
    if s.confirm_split_band and len(splits) == 1:
        other = next((k for k, m in ranked if cpu_split(setup.space, dict(k)) not in splits), None)
        if other is not None and state.visited[other].rows_per_s >= best_x * (1.0 - s.confirm_split_band):
            keys.append(other)
    return [dict(k) for k in keys]


def paired_ranking(state: SearchState) -> list[tuple[tuple, float]]:
    """Configurations with confirmation (or settle) measurements, best first by the mean of
    those measurements only (never one that failed)."""
    ranked = [(k, float(np.mean(v))) for k, v in state.paired.items() if v and not state.visited[k].failed]
    return sorted(ranked, key=lambda kv: -kv[1])


def recommendation(setup: SearchSetup, state: SearchState) -> tuple[Config, Measurement] | None:
    """Once two or more configurations have confirmation measurements, the best by the mean of
    those (paired in time); before that, the best by the mean of all of a configuration's
    measurements. Never a configuration that failed, and never one whose mean is more than
    ``confirm_band`` below the best mean measured: then that best is it."""
    ran = {k: m for k, m in state.visited.items() if not m.failed}
    if not ran:
        return None
    top_key = max(ran, key=lambda k: ran[k].rows_per_s)
    ranked = paired_ranking(state)
    key = ranked[0][0] if len(ranked) >= 2 else top_key
    if ran[key].rows_per_s < ran[top_key].rows_per_s * (1.0 - setup.settings.confirm_band):
        key = top_key
    return dict(key), ran[key]


def start_confirmation(state: SearchState, queue: list[Config], reason: str) -> Config:
    """Begin the confirmation of ``queue`` (not empty): its first candidate now, the rest queued,
    and the order kept so the settle can reverse it."""
    state.confirm_queue, state.confirm_reason = queue[1:], reason
    state.confirm_order = [Masker.key(c) for c in queue]
    return queue[0]


def settle_queue(setup: SearchSetup, state: SearchState, room_for: Callable[[int], bool]) -> list[Config]:
    """If the two best confirmed configurations are within ``settle_band`` of each other by their
    paired measurements: each once more, if ``room_for`` says both fit in the budget; otherwise
    nothing. The first round goes in the reverse of the confirmation's order, and each
    later round reverses the one before (so drift favours neither)."""
    band = setup.settings.settle_band
    ranked = paired_ranking(state)
    if not band or len(ranked) < 2 or ranked[1][1] < ranked[0][1] * (1.0 - band):
        return []
    if not room_for(SETTLE_PAIR):
        return []
    pair = [ranked[0][0], ranked[1][0]]
    order = {k: i for i, k in enumerate(state.confirm_order)}
    pair.sort(key=lambda k: -order.get(k, 0))  # reverse of the confirmation's order
    if state.settle_rounds % 2 == 1:
        pair.reverse()
    return [dict(k) for k in pair]
