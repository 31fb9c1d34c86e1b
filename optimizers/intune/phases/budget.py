"""When the search stops, and what the time budget still holds.

Every check of what still fits assumes the next measurement takes as long as the longest recent
one; the search keeps for the end only what the confirmation of the current near-ties needs
(:func:`confirm_reserve`), and a confirmation that no longer fits is not started, so a run ends
within its budget.
"""

from __future__ import annotations

from optimizers.intune.phases.confirm import RACE_PAIR, confirm_candidates
from optimizers.intune.state import SearchSetup, SearchState

#: Stop reasons after which the search first tries an escape or an exploration.
STALLED = ("no improvement", "agent chose stop", "no valid unmeasured neighbour left")


def timed(setup: SearchSetup, state: SearchState) -> bool:
    """Whether the time budget applies yet: a budget, a first ask and one measurement's duration."""
    return setup.time_budget_s is not None and state.t0 is not None and bool(state.durations)


def expected_s(state: SearchState, window: int) -> float:
    """How long the next measurement may take: the longest of the last ``window`` ones, leaving
    out the first (it pays the measuring process's start-up) and any that followed a failed one (a
    failure restarts the measuring process, and the next measurement pays its start-up again)
    unless the last measurement failed. The longest, not the typical: a measurement that starts
    must end within the budget."""
    failed = [h["oom"] for h in state.history]
    if failed and failed[-1]:
        recent = state.durations[1:]
    else:
        recent = [d for i, d in enumerate(state.durations) if i > 0 and not (i <= len(failed) and failed[i - 1])]
    recent = recent[-window:] or state.durations
    return float(max(recent))


def confirm_room_s(setup: SearchSetup, state: SearchState) -> float:
    """Seconds left before ``confirm_share`` of the budget (only when :func:`timed`)."""
    assert setup.time_budget_s is not None and state.t0 is not None
    return setup.settings.confirm_share * setup.time_budget_s - (setup.clock() - state.t0)


def measurements_that_fit(setup: SearchSetup, state: SearchState) -> int | None:
    """How many more measurements fit before ``confirm_share`` of the budget (None: no limit)."""
    if not timed(setup, state):
        return None
    return max(0, int(confirm_room_s(setup, state) // expected_s(state, setup.settings.duration_window)))


def room_for(setup: SearchSetup, state: SearchState, measurements: int) -> bool:
    """Whether what is left before ``confirm_share`` of the budget holds ``measurements`` more."""
    if not timed(setup, state):
        return True
    return confirm_room_s(setup, state) >= measurements * expected_s(state, setup.settings.duration_window)


def fits(setup: SearchSetup, state: SearchState, measurements: int = 1) -> bool:
    """Whether ``measurements`` more fit in the part of the budget kept for them."""
    if not timed(setup, state):
        return True
    assert setup.time_budget_s is not None and state.t0 is not None
    expected = expected_s(state, setup.settings.duration_window)
    return setup.clock() - state.t0 + measurements * expected <= setup.settings.confirm_share * setup.time_budget_s


def confirm_reserve(setup: SearchSetup, state: SearchState, best_x: float | None) -> int:
    """Measurements to keep for the end: the race's first round over what would be confirmed now
    and, if that is two or more, ``race_min_rounds - 1`` more rounds of the top two, as far as
    ``race_share`` of the budget holds them (one more round at least). None while
    fewer than ``reserve_after`` configurations ran (search on). Kept to what is needed, so a
    short budget is not spent waiting on a race of near-ties that do not exist."""
    s = setup.settings
    if best_x is None or sum(1 for m in state.visited.values() if not m.failed) < s.reserve_after:
        return 0
    confirm = len(confirm_candidates(setup, state, best_x))
    if confirm < 2 or s.race_rounds < 2:
        return confirm
    more = RACE_PAIR * (min(s.race_min_rounds, s.race_rounds) - 1)
    if timed(setup, state):  # a short budget keeps one more round of the top two, not the search's time
        assert setup.time_budget_s is not None
        fit = int(s.race_share * setup.time_budget_s // expected_s(state, s.duration_window)) - confirm
        more = max(min(more, fit), RACE_PAIR)
    return confirm + more


def stop_reason(setup: SearchSetup, state: SearchState, now: float, best_x: float | None) -> str | None:
    """Why the search stops now, if it does: the time budget first (a stall must not take the
    time kept for the confirmation), then the step limit, then a stall (``patience``)."""
    s = setup.settings
    if timed(setup, state):
        assert setup.time_budget_s is not None and state.t0 is not None
        expected = expected_s(state, s.duration_window)
        if now - state.t0 + expected > s.finish_share * setup.time_budget_s:
            return "time budget"
        reserve = confirm_reserve(setup, state, best_x)
        if reserve and now - state.t0 + expected * (1 + reserve) > s.confirm_share * setup.time_budget_s:
            return "time budget (kept for the confirmation)"
    if state.steps >= s.max_steps:
        return "step limit"
    if state.no_improve >= s.patience:
        return f"no improvement in {s.patience} live steps"
    return None
