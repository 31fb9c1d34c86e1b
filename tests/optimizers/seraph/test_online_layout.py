"""The online layout decision: the predicted env-steps ratio, its bound, the switch and the guard."""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

import pytest

from optimizers.seraph.models import RunShape
from optimizers.seraph.online_layout import (
    LayoutController, OnlineLayout, RiskBudget, bootstrap_bound, chunk_counts, predicted_ratio, step_floor,
)


def test_the_step_floor_keeps_gaes_horizon() -> None:
    assert step_floor(0.99, 0.95) == 34  # 2 / (1 - 0.9405) = 33.6
    assert step_floor(0.9, 0.5) == 25  # the absolute floor
    assert chunk_counts(2000, 34) == (2, 4, 8, 16)  # 125 steps at 16; the cap on chunks
    assert chunk_counts(2000, 300) == (2, 4)  # 500 >= 300 > 250
    assert chunk_counts(40, 34) == ()


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
    mean_return: float | None = 0.0
    layout_probe: dict[str, Any] | None = None
    ppo_stats: dict[str, Any] = field(default_factory=lambda: {"approx_kl": 0.01, "clipfrac": 0.1})


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


def test_the_guard_reverts_on_a_kl_breach() -> None:
    ol = _online()
    _feed(ol, [Rec(i, 4000 * (i + 1), float(i), layout_probe=_probe(0.0001)) for i in range(3)])
    hot = Rec(3, 16000, 3.5, ppo_stats={"approx_kl": 0.2, "clipfrac": 0.1})
    back = ol.observe(hot)
    assert back == (RunShape(2, 1769, 4000), 2000)
    assert ol.decisions[-1].action == "revert" and "approx KL" in ol.decisions[-1].reason
    assert ol.probe() == ()  # its overspend left the slack negative


def test_the_guard_reverts_when_the_measured_iterations_are_not_cheaper() -> None:
    ol = _online()
    _feed(ol, [Rec(i, 4000 * (i + 1), float(i), layout_probe=_probe(0.0001)) for i in range(3)])
    out = [ol.observe(Rec(3 + k, 16000 + 4000 * k, 2.0 + 1.5 * (k + 1))) for k in range(3)]  # dearer per iteration
    assert out[:2] == [None, None] and out[2] == (RunShape(2, 1769, 4000), 2000)
    assert "measured break-even" in ol.decisions[-1].reason


class _Planner:
    def __init__(self) -> None:
        from optimizers.seraph.space import SearchSpace

        self.steps_per_env, self.space = 2000, SearchSpace(min_steps_per_actor=2000)


def test_the_controller_hands_the_new_layout_to_the_trainer_and_the_planner() -> None:
    from serverless.run_config import RunConfig

    ol, planner = _online(), _Planner()
    ctl = LayoutController(ol, planner, lambda s: RunConfig(s.actors, s.memory_mb, s.batch))
    outs = []
    for i in range(3):
        assert ctl.layout_probe() == (2, 4, 8, 16)
        outs.append(ctl.after_iteration(Rec(i, 4000 * (i + 1), float(i), layout_probe=_probe(0.0001))))
    cfg = outs[-1]
    assert cfg.steps_per_env == ol.steps_per_env < 2000 and cfg.actors == 4000 // cfg.steps_per_env
    assert planner.steps_per_env == cfg.steps_per_env and planner.space.min_steps_per_actor == max(32, cfg.steps_per_env)


def test_a_switch_that_measures_up_holds_and_the_probes_own_time_is_left_out() -> None:
    ol = _online(learner_usd_per_s=1.0, budget=RiskBudget(alpha=1.0))  # a budget that pays for such dear probes
    probe = {**_probe(0.0001), "cpu_s": 0.5}  # each probed iteration: 1.0 measured, 0.5 of it the probe's
    _feed(ol, [Rec(i, 4000 * (i + 1), float(i), layout_probe=probe) for i in range(3)])
    bound = ol.decisions[-1].options[-1].bound
    # before, net of the probe: 0.5 per iteration; after: well under 0.5 / (bound * 1.16)
    out = [ol.observe(Rec(3 + k, 16000 + 4000 * k, 2.0 + 0.3 * (k + 1))) for k in range(3)]
    assert out == [None, None, None] and ol.decisions[-1].action == "hold" and bound < 1.2
    assert ol.decisions[-1].progress.verdict == "no check"  # a flat return: no climb to hold it to
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
    ol = _online(budget=RiskBudget(alpha=0.025))
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
    ol = _online(budget=RiskBudget(alpha=0.0), max_wait=2)  # no slack at all
    _feed(ol, [Rec(i, 4000 * (i + 1), float(i), layout_probe=p) for i, p in enumerate(_MIXED * 2)])
    assert [d.action for d in ol.decisions] == ["wait", "wait", "stay"]
    assert ol.decisions[-1].allowed is False and "did not cover" in ol.decisions[-1].reason
    assert ol.probe() == ()


def test_a_reverted_switch_is_charged_and_no_window_opens_while_the_slack_is_negative() -> None:
    ol = _online()
    _feed(ol, [Rec(i, 4000 * (i + 1), float(i), layout_probe=_probe(0.0001)) for i in range(3)])
    switched = ol.decisions[-1]
    assert switched.action == "switch" and switched.to_steps_per_env == 125
    # one guarded iteration spends 3 (a baseline iteration: 1) and breaches the KL band
    ol.observe(Rec(3, 16000, 5.0, ppo_stats={"approx_kl": 0.2, "clipfrac": 0.1}))
    revert = ol.decisions[-1]
    assert revert.action == "revert" and revert.budget.slack < 0 and revert.as_dict()["risk"]["slack"] < 0
    assert revert.budget.spent == pytest.approx(switched.budget.spent + 3.0)
    # baseline iterations earn back 10% of theirs each; no probe (no window) until the slack is >= 0
    cost, i = 5.0, 4
    while not ol.probe():
        assert ol.budget.slack < 0
        cost, i = cost + 1.0, i + 1
        ol.observe(Rec(i, 4000 * (i + 1), cost))
    assert ol.budget.slack >= 0 and i > 10
    assert ol.probe() == (2, 4, 8)  # the second window: the reverted layout (16 chunks, 125 steps) left out


def _climb(after: list[float], target: float | None = None, **kw: Any) -> OnlineLayout:
    """A run whose return climbs 100 per iteration (4,000 env steps), with ±10 of noise, over 3
    iterations and 3 probed ones, switches to 125 steps per env and then returns ``after``
    (relative to the return at the switch), its iterations a third as dear as before."""
    ol = _online(target=target, **kw)
    noise = [10.0, -10.0]
    before = [Rec(i, 4000 * (i + 1), float(i), mean_return=-1000.0 + 100 * i + noise[i % 2],
                  layout_probe=_probe(0.0001) if i >= 3 else None) for i in range(6)]
    _feed(ol, before)
    assert ol.decisions[-1].action == "switch" and ol.steps_per_env == 125
    at_switch = before[-1].mean_return
    for k, r in enumerate(after):
        i = 6 + k
        ol.observe(Rec(i, 4000 * (i + 1), 5.0 + 0.3 * (k + 1), mean_return=at_switch + r))
    return ol


def test_the_progress_check_reverts_a_switch_whose_return_stops_climbing() -> None:
    # the return neither drops nor climbs: the KL, clip, return and objective checks all pass
    ol = _climb([5.0, -5.0, 0.0])
    d = ol.decisions[-1]
    assert d.action == "revert" and ol.steps_per_env == 2000 and "progress" in d.reason
    p = d.progress
    assert p is not None and p.verdict == "breach" and p.points == (6, 4)
    assert p.before == pytest.approx(100 / 4000, rel=0.1) and abs(p.after) < p.floor - p.se
    assert p.floor == pytest.approx(p.before / (ol.decisions[-2].options[-1].bound * 1.16))
    assert "floor" in d.reason and d.as_dict()["progress"]["verdict"] == "breach"


def test_a_switch_whose_return_climbs_at_the_rate_before_holds() -> None:
    ol = _climb([110.0, 190.0, 310.0])
    d = ol.decisions[-1]
    assert d.action == "hold" and ol.steps_per_env == 125 and d.progress.verdict == "pass"
    assert d.progress.after >= d.progress.floor and "at or above the floor" in d.reason


def test_a_run_near_its_target_is_not_reverted_for_a_flattening_return() -> None:
    # the return at the switch (-490) is 200 below the target: the floor's rate (about 81 per
    # iteration) climbs that within the guard's 3 iterations
    ol = _climb([5.0, -5.0, 0.0], target=-290.0)
    d = ol.decisions[-1]
    assert d.action == "hold" and ol.steps_per_env == 125 and d.progress.verdict == "near target"
    # far from the target, the same return is reverted
    assert _climb([5.0, -5.0, 0.0], target=-190.0).decisions[-1].action == "revert"


def test_the_progress_check_watches_on_while_unsure_and_no_longer_than_its_window() -> None:
    # a climb of 73 per iteration, noisy: below the floor (81), not clearly at three iterations;
    # the check watches on until it is clearly below, or its window ends
    slow = [73.0 * (k + 1) + (40.0 if k % 3 == 1 else -20.0) for k in range(8)]
    ol = _climb(slow)
    d = ol.decisions[-1]
    assert d.action == "revert" and d.progress.verdict == "breach" and d.progress.points[1] == 5  # 4 guarded
    assert d.progress.after < d.progress.floor - d.progress.se
    held = _climb(slow, progress_window=3)  # no watching on: not clearly below is not a breach
    assert held.decisions[-1].action == "hold" and held.decisions[-1].progress.verdict == "unsure"
    assert held.steps_per_env == 125
