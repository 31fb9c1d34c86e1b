"""The end of a search: a race of the finalists, measured side by side, and the recommendation.

The finalists are the best configurations the search measured (and the best of another CPU
split, and the leader with larger buffers where memory allows them). They are measured in
*rounds*: every finalist once per round, back to back, each round in the order opposite to the
one before (A, B, C, then C, B, A: a linear drift of the machine's speed cancels). Measurements
of one round are paired in time, while a search measurement of the same configuration may be
minutes older and was selected for being high, so only the rounds decide.

After each round the leader is the finalist with the best geometric mean over the rounds. A
finalist leaves the race when the leader is clearly better: by more than ``race_band`` over the
rounds so far, or, from ``race_min_rounds`` rounds on, when the interval of the paired ratio
(:func:`ingestion.measurement.paired_ratio`, ``race_confidence``) excludes a tie. The race ends
with one finalist left, after ``race_rounds`` rounds, or when the next round no longer fits in
the budget (then the top two race on while two fit). If more than one finalist is left, the
recommendation is the one with the best median over the rounds (side by side).
"""

from __future__ import annotations

from typing import Callable

import numpy as np

from ingestion.measurement import Config, Measurement, paired_ratio
from optimizers.intune.env import Masker
from optimizers.intune.phases.start import cpu_split
from optimizers.intune.state import RaceReport, SearchSetup, SearchState

#: Once the first round is measured, the race is budgeted for the top two.
RACE_PAIR = 2


def confirm_candidates(setup: SearchSetup, state: SearchState, best_x: float) -> list[Config]:
    """What the first round measures again, best first: the ``confirm_top`` best configurations
    that measured within ``confirm_band`` of ``best_x``; if those share one CPU split, also the
    best configuration of another split that measured within ``confirm_split_band`` (which split
    wins is the decision that moves throughput most; a split that measured 10-25% lower in one
    search measurement may still be the better one: a measurement moves about 10%). When only
    the best passes ``confirm_band`` (one lucky high measurement), the second best races too if
    within ``confirm_split_band``. Then the leader's buffer variants (:func:`buffer_variants`)."""
    s = setup.settings
    ranked = state.ranked()
    floor = best_x * (1.0 - s.confirm_band)
    keys = [k for k, m in ranked[: s.confirm_top] if m.rows_per_s >= floor]
    wide = best_x * (1.0 - (s.confirm_split_band or s.confirm_band))
    if len(keys) == 1 and len(ranked) > 1 and ranked[1][1].rows_per_s >= wide:
        keys.append(ranked[1][0])  # a lucky high measurement must not race alone
    splits = {cpu_split(setup.space, dict(k)) for k in keys}
    if s.confirm_split_band and len(splits) == 1:
        other = next((k for k, m in ranked if cpu_split(setup.space, dict(k)) not in splits), None)
        if other is not None and state.visited[other].rows_per_s >= best_x * (1.0 - s.confirm_split_band):
            keys.append(other)
    out = [dict(k) for k in keys]
    if keys and s.confirm_buffers:
        out += [c for c in buffer_variants(setup, state, dict(keys[0]), best_x)[0] if Masker.key(c) not in keys]
    return out


def buffer_variants(setup: SearchSetup, state: SearchState, leader: Config, best_x: float
                    ) -> tuple[list[Config], dict[str, int]]:
    """For each buffer knob (prefetch, shuffle) of ``leader``: the leader with that knob at its
    largest value the memory model allows, so a buffer is chosen by measured rows/s and not by
    being small. Left out when that is the leader's own value, when it failed, or when the search
    measured it more than ``confirm_split_band`` below ``best_x``. Also returns the knobs whose
    larger values memory forbids (memory is then the binding constraint), each with the largest
    value allowed."""
    variants, memory_bound = [], {}
    band = setup.settings.confirm_split_band or setup.settings.confirm_band
    for knob in (k for k in setup.space.knobs if k.kind == "buffer"):
        larger = [v for v in knob.values if v > leader[knob.name]]
        allowed = [v for v in larger if state.masker.memory_safe({**leader, knob.name: v})]
        if len(allowed) < len(larger):
            memory_bound[knob.name] = max([leader[knob.name], *allowed])
        if not allowed:
            continue
        variant = {**leader, knob.name: max(allowed)}
        seen = state.visited.get(Masker.key(variant))
        if state.masker.safe(variant) and (seen is None or seen.rows_per_s >= best_x * (1.0 - band)):
            variants.append(variant)
    return variants, memory_bound


def _log_means(state: SearchState, keys: list[tuple]) -> dict[tuple, float]:
    return {k: float(np.mean(np.log(np.maximum(state.paired[k], 1e-9)))) for k in keys}


def racing(state: SearchState) -> list[tuple]:
    """The finalists still in the race: measured in every round done so far, never failed."""
    need = max(1, state.race_rounds)  # during a round, those not measured in it yet count too
    return [k for k in state.race_order if len(state.paired.get(k, [])) >= need and not state.visited[k].failed]


def paired_ranking(state: SearchState) -> list[tuple[tuple, float]]:
    """The finalists still racing, best first by the median of their rounds (side by side)."""
    ranked = [(k, float(np.median(state.paired[k]))) for k in racing(state)]
    return sorted(ranked, key=lambda kv: -kv[1])


def recommendation(setup: SearchSetup, state: SearchState) -> tuple[Config, Measurement] | None:
    """Once two or more configurations raced: the one the race left (the best by the median of
    its rounds when more than one is left); before that, the best by the mean of all of a
    configuration's measurements. Never a configuration that failed, and never one whose mean is
    more than ``confirm_band`` below the best mean measured among those that raced (before a
    race: among all): then that best is it."""
    ran = {k: m for k, m in state.visited.items() if not m.failed}
    if not ran:
        return None
    ranked = paired_ranking(state) if sum(1 for v in state.paired.values() if v) >= 2 else []
    if ranked:  # after a race, only what raced side by side: never one a single search measurement put on top
        ran = {k: m for k, m in ran.items() if state.paired.get(k)}
    top_key = max(ran, key=lambda k: ran[k].rows_per_s)
    key = ranked[0][0] if ranked else top_key
    if ran[key].rows_per_s < ran[top_key].rows_per_s * (1.0 - setup.settings.confirm_band):
        key = top_key
    return dict(key), ran[key]


def start_confirmation(state: SearchState, queue: list[Config], reason: str) -> Config:
    """Begin the race with its first round, ``queue`` (not empty): its first candidate now, the
    rest queued, and the order kept so the next round can reverse it."""
    state.confirm_queue, state.confirm_reason = queue[1:], reason
    state.race_order = [Masker.key(c) for c in queue]
    state.race_entrants = len(queue)
    return queue[0]


def _eliminate(setup: SearchSetup, state: SearchState, keys: list[tuple]) -> list[tuple]:
    """The finalists that stay after this round (the leader first), each one that left recorded."""
    s = setup.settings
    means = _log_means(state, keys)
    leader = max(keys, key=lambda k: means[k])
    stay = [leader]
    for k in keys:
        if k == leader:
            continue
        pr = paired_ratio(state.paired[leader], state.paired[k], confidence=s.race_confidence)
        clearly = s.race_band is not None and pr.ratio > 1.0 / (1.0 - s.race_band)
        if clearly or (state.race_rounds >= s.race_min_rounds and pr.low > 1.0):
            state.race_out.append({"config": dict(k), "after_round": state.race_rounds, "leader_over_it": pr.ratio,
                                   "low": pr.low, "high": pr.high, "by": "band" if clearly else "interval"})
        else:
            stay.append(k)
    return stay


def next_round(setup: SearchSetup, state: SearchState, room_for: Callable[[int], bool]) -> list[Config]:
    """After a round: who stays (:func:`_eliminate`), and the next round in the order opposite to
    the last one's; nothing when one finalist is left, after ``race_rounds`` rounds, or when not
    even the top two fit (``room_for``)."""
    keys = racing(state)
    if len(keys) < 2:
        return []
    stay = _eliminate(setup, state, keys)
    if len(stay) > RACE_PAIR and not room_for(len(stay)):
        means = _log_means(state, stay)
        stay = sorted(stay, key=lambda k: -means[k])[:RACE_PAIR]
    position = {k: i for i, k in enumerate(state.race_order)}
    state.race_order = sorted(stay, key=lambda k: -position[k])
    if len(stay) < 2 or state.race_rounds >= setup.settings.race_rounds or not room_for(len(stay)):
        return []
    return [dict(k) for k in state.race_order]


def race_report(setup: SearchSetup, state: SearchState) -> RaceReport:
    """What the race did: its rounds, who raced, who left and why, how the pick was decided, and
    the buffer knobs memory held down (for the pick)."""
    left = racing(state) if sum(1 for v in state.paired.values() if v) >= 2 else []
    best = recommendation(setup, state)
    bound = {} if best is None else buffer_variants(setup, state, best[0], best[1].rows_per_s)[1]
    decided = "search" if not left else "the others left the race" if len(left) == 1 else "median of the rounds"
    return {"rounds": state.race_rounds, "entrants": state.race_entrants,
            "left": [{"config": dict(k), "rounds_rows_per_s": state.paired[k]} for k in left],
            "eliminated": state.race_out, "decided_by": decided, "buffers_memory_bound": bound}
