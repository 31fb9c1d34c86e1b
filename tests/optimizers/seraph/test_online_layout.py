"""The online layout decision: the predicted env-steps ratio, its bound, the switch, the guard, the
risk budget, and the settings every number comes from."""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import pytest

from optimizers.seraph.online_layout import (
    LayoutController, OnlineLayout, OnlineLayoutSettings, bootstrap_bound, predicted_ratio,
)
from serverless.run_shape import RunShape


def test_the_step_floor_keeps_gaes_horizon() -> None:
    s = OnlineLayoutSettings()
    assert s.step_floor(0.99, 0.95) == 34  # 2 / (1 - 0.9405) = 33.6
    assert s.step_floor(0.9, 0.5) == 25  # the absolute floor
    assert s.chunk_counts(2000, 34) == (2, 4, 8, 16)  # 125 steps at 16; the cap on chunks
    assert s.chunk_counts(2000, 300) == (2, 4)  # 500 >= 300 > 250
    assert s.chunk_counts(40, 34) == ()
    # the floor and the cap are the settings'
    assert OnlineLayoutSettings(min_steps_per_env=40).step_floor(0.9, 0.5) == 40
    assert OnlineLayoutSettings(most_chunks=4).chunk_counts(2000, 34) == (2, 4)


def _unit(var_env: float = 1.0, var_chunk: float = 4.0, signal: float = 1.0, bias: float = 0.0) -> dict[str, float]:
    return {"var_env": var_env, "var_chunk": var_chunk, "signal": signal, "bias": bias}


def test_the_ratio_follows_noise_and_bias() -> None:
    # 2 envs, 4 chunks: nu0 = 1/(2*1) = 0.5, nuL = 4/(4*2*1) = 0.5: same noise, no bias
    assert predicted_ratio([_unit()], 4, 2) == pytest.approx(1.0)
    # chunks as noisy as whole envs: m times less noise at the wider layout
    assert predicted_ratio([_unit(var_chunk=1.0)], 4, 2) == pytest.approx((1 + 0.125) / 1.5)
    # a bias of 10% of the gradient's norm: 1 / 0.9
    assert predicted_ratio([_unit(bias=0.01)], 4, 2) == pytest.approx(1 / 0.9)
    assert math.isinf(predicted_ratio([_unit(signal=-1.0)], 4, 2))  # no signal: no evidence
    assert math.isinf(predicted_ratio([_unit(bias=2.0)], 4, 2))  # bias larger than the gradient
    assert math.isinf(predicted_ratio([_unit()], 4, 1))  # one env: no independent pair


def test_the_bound_is_deterministic_and_above_the_point_when_units_disagree() -> None:
    units = [_unit(bias=b) for b in (0.0, 0.001, 0.004, 0.02)]
    a, b = bootstrap_bound(units, 4, 2, seed=7), bootstrap_bound(units, 4, 2, seed=7)
    assert a == b and a > predicted_ratio(units, 4, 2)


@dataclass
class Rec:
    iteration: int
    env_steps: int
    cost_usd: float
    iteration_lambda_s: float = 1.0
    layout_probe: dict[str, Any] | None = None


def _probe(bias: float, chunks: tuple[int, ...] = (2, 4, 8, 16)) -> dict[str, Any]:
    return {"envs": 2, "segment_steps": [2000, 2000],
            "layouts": [{"chunks": m, "pairs": [_unit(var_chunk=m * 1.0, bias=bias * m)]} for m in chunks]}


def _online(**kw: Any) -> OnlineLayout:
    """Iterations cost 1 + 1 per 1,000 steps a function runs (a wider layout is cheaper per iteration)."""
    def cost_of(shape: RunShape) -> tuple[float, float]:
        t = 1.0 + shape.batch / shape.actors / 1000
        return t, t

    return OnlineLayout(steps_per_env=2000, shape=RunShape(2, 1769, 4000), floor=34, cost_of=cost_of,
                        objective=lambda c, t: c, **kw)


def _feed(ol: OnlineLayout, records: list[Rec]) -> list[Any]:
    out = []
    for r in records:
        ol.probe()
        out.append(ol.observe(r))
    return out


def test_it_switches_when_the_bound_beats_the_break_even_and_says_why() -> None:
    ol = _online()
    assert ol.probe() == (2, 4, 8, 16)
    changes = _feed(ol, [Rec(i, 4000 * (i + 1), float(i), layout_probe=_probe(0.0001)) for i in range(3)])
    assert changes[:2] == [None, None] and changes[2] is not None
    shape, spe = changes[2]
    d = ol.decisions[-1]
    assert d.action == "switch" and spe == d.to_steps_per_env < 2000 and shape.actors == 4000 // spe
    assert all(o.units == 3 for o in d.options) and "break-even" in d.reason
    # the risk budget: two baseline iterations' 10% (the first is only a reference); a switch whose
    # worst draw still saves risks nothing
    risk = d.as_dict()["risk"]
    assert risk["slack"] == pytest.approx(0.2) and risk["worst_case"] == 0.0 and risk["allowed"] is True
    assert ol.probe() == ()  # guarded: no probe


def test_it_stays_when_the_truncation_bias_eats_the_saving() -> None:
    ol = _online()
    changes = _feed(ol, [Rec(i, 4000 * (i + 1), float(i), layout_probe=_probe(0.2)) for i in range(3)])
    assert changes == [None, None, None]
    assert ol.decisions[-1].action == "stay" and not any(o.passes for o in ol.decisions[-1].options)
    assert ol.probe() == ()  # one window; exploring is over


def test_nothing_is_probed_where_no_wider_layout_is_cheaper_per_iteration() -> None:
    ol = OnlineLayout(steps_per_env=2000, shape=RunShape(2, 1769, 4000), floor=34,
                      cost_of=lambda s: (float(s.actors), 1.0), objective=lambda c, t: c)
    assert ol.probe() == () and ol.decisions[0].action == "stay"


def test_the_guard_reverts_when_the_measured_iterations_are_not_cheaper() -> None:
    ol = _online()
    _feed(ol, [Rec(i, 4000 * (i + 1), float(i), layout_probe=_probe(0.0001)) for i in range(3)])
    out = [ol.observe(Rec(3 + k, 16000 + 4000 * k, 2.0 + 1.5 * (k + 1))) for k in range(3)]  # dearer per iteration
    assert out[:2] == [None, None] and out[2] == (RunShape(2, 1769, 4000), 2000)
    d = ol.decisions[-1]
    assert d.action == "revert" and d.from_steps_per_env == 125 and d.to_steps_per_env == 2000
    # before 1.0 per iteration, after 1.5: 0.667 against the bar
    assert "measured break-even 0.667" in d.reason and "x (1 + 16%)" in d.reason
    assert ol.probe() == ()  # its overspend left the slack negative


class _Planner:
    def __init__(self) -> None:
        from optimizers.seraph.space import SearchSpace

        self.steps_per_env, self.space = 2000, SearchSpace(min_steps_per_actor=2000)


def test_the_controller_hands_the_new_layout_to_the_trainer_and_the_planner() -> None:
    ol, planner = _online(), _Planner()
    ctl = LayoutController(ol, planner)
    outs = []
    for i in range(3):
        assert ctl.layout_probe() == (2, 4, 8, 16)
        outs.append(ctl.after_iteration(Rec(i, 4000 * (i + 1), float(i), layout_probe=_probe(0.0001))))
    cfg = outs[-1]
    assert cfg.steps_per_env == ol.steps_per_env < 2000 and cfg.actors == 4000 // cfg.steps_per_env
    assert planner.steps_per_env == cfg.steps_per_env and planner.space.min_steps_per_actor == max(32, cfg.steps_per_env)


def test_a_switch_that_measures_up_holds_and_the_probes_own_time_is_left_out() -> None:
    ol = _online(learner_usd_per_s=1.0, settings=OnlineLayoutSettings(risk_alpha=1.0))  # pays for dear probes
    probe = {**_probe(0.0001), "cpu_s": 0.5}  # each probed iteration: 1.0 measured, 0.5 of it the probe's
    _feed(ol, [Rec(i, 4000 * (i + 1), float(i), layout_probe=probe) for i in range(3)])
    bound = ol.decisions[-1].options[-1].bound
    # before, net of the probe: 0.5 per iteration; after: well under 0.5 / (bound * 1.16)
    out = [ol.observe(Rec(3 + k, 16000 + 4000 * k, 2.0 + 0.3 * (k + 1))) for k in range(3)]
    assert out == [None, None, None] and ol.decisions[-1].action == "hold" and bound < 1.2
    assert "measured break-even 1.667" in ol.decisions[-1].reason and ">= the bound" in ol.decisions[-1].reason
    # a switch that holds opens one more window at the new layout; at 125 steps per env the only
    # wider layout left (62 steps) is not predicted to save 16% per iteration, so it is not probed
    assert ol.probe() == () and ol.decisions[-1].action == "stay" and ol.decisions[-1].from_steps_per_env == 125
    # recorded at the iteration it follows, as the hold before it is
    assert ol.decisions[-1].iteration == ol.decisions[-2].iteration == 5 and ol.decisions[-1].env_steps == 24000


def _probe16(*biases: float) -> dict[str, Any]:
    """One probed iteration at 16 chunks, a pair of envs per bias."""
    return {"envs": 2, "segment_steps": [2000, 2000],
            "layouts": [{"chunks": 16, "pairs": [_unit(var_chunk=16.0, bias=b) for b in biases]}]}


#: pairs that disagree: one with a truncation bias of 60% of the gradient, two with 4%
_MIXED = [_probe16(0.36), _probe16(0.0016), _probe16(0.0016)]


def test_a_switch_waits_until_the_slack_covers_its_worst_case() -> None:
    # the bound passes (about 2 x 1.16 < break-even 2.67) but the worst draw (2.5: the biased pair
    # alone) would not pay for the guard window: it loses 3 x (1 / 2.67 - 1 / (2.5 x 1.16)) = 0.09
    ol = _online(settings=OnlineLayoutSettings(risk_alpha=0.025))
    changes = _feed(ol, [Rec(i, 4000 * (i + 1), float(i), layout_probe=p) for i, p in enumerate(_MIXED * 2)])
    assert changes[:4] == [None] * 4 and changes[4] is not None
    waits, switch = ol.decisions[:-1], ol.decisions[-1]
    assert [d.action for d in waits] == ["wait", "wait"] and switch.action == "switch"
    for d in waits:
        assert not d.allowed and d.worst_case > d.budget.slack >= 0 and "risk budget waits" in d.reason
        assert d.to_steps_per_env == 125 and d.options[0].passes
    # the worst case is as before; the slack has grown (2.5% of each baseline iteration) to cover it
    assert switch.worst_case > 0 and switch.worst_case == pytest.approx(waits[0].worst_case)
    assert switch.allowed and switch.worst_case <= switch.budget.slack
    risk = switch.as_dict()["risk"]
    assert risk == {"alpha": 0.025, "credit": pytest.approx(4.0), "spent": pytest.approx(4.0),
                    "slack": pytest.approx(0.1), "worst_case": pytest.approx(switch.worst_case), "allowed": True}


def test_a_switch_that_cannot_lose_goes_while_the_probes_hold_the_slack_below_zero() -> None:
    ol = _online(learner_usd_per_s=1.0)
    probe = {**_probe(0.0001), "cpu_s": 0.2}  # each probed iteration: 1.0 spent, 0.2 of it the probe's
    changes = _feed(ol, [Rec(i, 4000 * (i + 1), float(i), layout_probe=probe) for i in range(3)])
    d = ol.decisions[-1]
    assert changes[2] is not None and d.action == "switch"
    assert d.budget.slack < 0 and d.worst_case == 0.0 and d.allowed
    assert d.budget.slack == pytest.approx(2 * (1.1 * 0.8 - 1.0))


def test_a_window_the_slack_never_covers_stays() -> None:
    ol = _online(settings=OnlineLayoutSettings(risk_alpha=0.0, max_wait=2))  # no slack at all
    _feed(ol, [Rec(i, 4000 * (i + 1), float(i), layout_probe=p) for i, p in enumerate(_MIXED * 2)])
    assert [d.action for d in ol.decisions] == ["wait", "wait", "stay"]
    assert ol.decisions[-1].allowed is False and "did not cover" in ol.decisions[-1].reason
    assert ol.probe() == ()


def test_a_reverted_switch_is_charged_and_no_window_opens_while_the_slack_is_negative() -> None:
    ol = _online()
    _feed(ol, [Rec(i, 4000 * (i + 1), float(i), layout_probe=_probe(0.0001)) for i in range(3)])
    switched = ol.decisions[-1]
    assert switched.action == "switch" and switched.to_steps_per_env == 125
    # three guarded iterations spend 3 each (a baseline iteration: 1): the measured break-even reverts
    for k in range(3):
        ol.observe(Rec(3 + k, 16000 + 4000 * k, 2.0 + 3.0 * (k + 1)))
    revert = ol.decisions[-1]
    assert revert.action == "revert" and revert.budget.slack < 0 and revert.as_dict()["risk"]["slack"] < 0
    assert revert.budget.spent == pytest.approx(switched.budget.spent + 9.0)
    # baseline iterations earn back 10% of theirs each; no probe (no window) until the slack is >= 0
    cost, i = 11.0, 5
    while not ol.probe():
        assert ol.budget.slack < 0
        cost, i = cost + 1.0, i + 1
        ol.observe(Rec(i, 4000 * (i + 1), cost))
    assert ol.budget.slack >= 0 and i > 10
    assert ol.probe() == (2, 4, 8)  # the second window: the reverted layout (16 chunks, 125 steps) left out


def test_the_settings_numbers_reach_the_decision() -> None:
    records = [Rec(i, 4000 * (i + 1), float(i), layout_probe=_probe(0.0001)) for i in range(3)]
    # the default change gain (16%): the bound (about 1.04) x 1.16 beats 16 chunks' break-even (2.67)
    assert _feed(_online(), records)[-1] is not None
    # a change gain of 160%: only 16 chunks' break-even (2.67 > 2.6) is worth a probe, and its bound
    # x 2.6 no longer beats it: the same evidence stays
    ol = _online(settings=OnlineLayoutSettings(change_gain=1.6))
    assert ol.probe() == (16,)
    assert _feed(ol, records) == [None, None, None]
    d = ol.decisions[-1]
    assert d.action == "stay" and not d.options[0].passes and "(160%)" in d.reason
    # the window's length, the guard's, the cap on functions and the risk budget's alpha
    ol = _online(settings=OnlineLayoutSettings(min_units=2, guard_window=1, max_actors=16, risk_alpha=0.2))
    changes = _feed(ol, records[:2])
    # at most 16 functions, 125 steps per env is no cheaper per iteration than 250: 16 envs of 250 steps
    assert changes[0] is None and changes[1] == (RunShape(16, 1769, 4000), 250)
    assert ol.decisions[-1].as_dict()["risk"]["alpha"] == 0.2 and ol.budget.alpha == 0.2
    assert ol.observe(Rec(2, 12000, 1.2)) is None and ol.decisions[-1].action == "hold"  # after one iteration


def test_a_run_opens_no_more_windows_than_its_settings_allow() -> None:
    ol = _online(settings=OnlineLayoutSettings(max_windows=1))
    _feed(ol, [Rec(i, 4000 * (i + 1), float(i), layout_probe=_probe(0.0001)) for i in range(3)])
    for k in range(3):
        ol.observe(Rec(3 + k, 16000 + 4000 * k, 2.0 + 0.3 * (k + 1)))
    assert [d.action for d in ol.decisions] == ["switch", "hold"]
    assert ol.probe() == () and len(ol.decisions) == 2  # exploring is over: no second window, nothing to record


def test_a_decision_records_the_same_fields_as_before() -> None:
    ol = _online()
    _feed(ol, [Rec(i, 4000 * (i + 1), float(i), layout_probe=_probe(0.0001)) for i in range(3)])
    assert set(ol.decisions[-1].as_dict()) == {"iteration", "env_steps", "action", "from_steps_per_env",
                                                "to_steps_per_env", "reason", "options", "risk"}


@pytest.mark.parametrize(("kw", "named"), [
    ({"bound_quantile": 1.0}, "bound_quantile is 1.0: between 0 and 1"),
    ({"min_units": 0}, "min_units is 0: a count, at least 1"),
    ({"max_wait": -1}, "max_wait is -1: a count, at least 0"),
    ({"change_gain": -0.1}, "change_gain is -0.1: a fraction, 0 or more"),
    ({"risk_alpha": math.nan}, "risk_alpha is nan"),
])
def test_settings_out_of_range_are_named(kw: dict[str, Any], named: str) -> None:
    with pytest.raises(ValueError, match=named.replace(".", r"\.")):
        OnlineLayoutSettings(**kw)
