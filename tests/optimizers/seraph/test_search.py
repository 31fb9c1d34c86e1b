"""The search on hand-made models with known optima, and constraint handling."""

import math

import pytest

from optimizers.seraph.models import ProgressModel, all_shapes
from serverless.run_shape import RunShape
from optimizers.seraph.objectives import make_objective
from optimizers.seraph.search import Constraints, choose, pareto_front, score_shapes
from core.errors import UserError

BATCHES = [250, 500, 1000, 2000, 4000, 8000, 16000]


def _cands(per_step_cost=1e-6, per_iter_cost=4e-3, b_noise=1000.0):
    # cost(B) = c * E(B) + f * S(B); with E_min = S_min * B_noise the optimum is B* = sqrt(f B_noise / c) = 2000.
    progress = ProgressModel(b_noise=b_noise, e_min=100_000.0)
    shapes = all_shapes([1, 2, 4], [1024], BATCHES, min_steps_per_actor=1)

    def t(s):  # time per iteration: fixed 1 s plus rollout split over the actors
        return 1.0 + 0.001 * s.batch / s.actors

    def c(s):  # extra actors add a per-iteration cost, so speed costs money
        return per_step_cost * s.batch + per_iter_cost + 1e-3 * (s.actors - 1)

    return score_shapes(shapes, t, c, lambda s: progress.env_steps(s.batch)), progress


def test_cost_optimum_is_the_analytic_one():
    cands, _ = _cands()
    out = choose(cands, make_objective("cost"))
    assert out.feasible and out.best is not None
    assert out.best.shape.batch == 2000
    assert out.best.shape.actors == 1


def test_speed_prefers_most_actors_and_a_large_batch():
    cands, _ = _cands()
    out = choose(cands, make_objective("speed"))
    best = min(cands, key=lambda c: c.time_s)
    assert out.best == best
    assert out.best.shape.actors == 4


def test_balanced_weight_moves_between_the_extremes():
    cands, _ = _cands()
    cost_end = choose(cands, make_objective("balanced", weight=1.0)).best
    speed_end = choose(cands, make_objective("balanced", weight=0.0)).best
    assert cost_end.cost_usd == min(c.cost_usd for c in cands)
    assert speed_end.time_s == min(c.time_s for c in cands)


def test_pareto_front_is_non_dominated_and_sorted():
    cands, _ = _cands()
    front = pareto_front(cands)
    for a in front:
        assert not any(b.time_s <= a.time_s and b.cost_usd < a.cost_usd for b in cands)
    assert [c.time_s for c in front] == sorted(c.time_s for c in front)


def test_feasible_deadline_binds_and_is_respected():
    cands, _ = _cands()
    free = choose(cands, make_objective("cost")).best
    deadline = free.time_s * 0.8
    out = choose(cands, make_objective("cost"), Constraints(deadline_s=deadline))
    assert out.feasible and out.best.time_s <= deadline
    assert out.binding == ["deadline_s"]
    assert out.best.cost_usd >= free.cost_usd


def test_infeasible_deadline_reports_best_achievable_time():
    cands, _ = _cands()
    fastest = min(c.time_s for c in cands)
    out = choose(cands, make_objective("cost"), Constraints(deadline_s=fastest / 2))
    assert not out.feasible and out.best is None
    assert out.binding == ["deadline_s"]
    assert out.fastest.time_s == fastest
    assert f"{fastest:.0f} s" in out.message


def test_infeasible_budget_reports_cheapest_cost():
    cands, _ = _cands()
    cheapest = min(c.cost_usd for c in cands)
    out = choose(cands, make_objective("speed"), Constraints(budget_usd=cheapest / 2))
    assert not out.feasible and out.binding == ["budget_usd"]
    assert out.cheapest.cost_usd == cheapest


def test_jointly_infeasible_constraints_name_both():
    cands, _ = _cands()
    fastest = min(cands, key=lambda c: c.time_s)
    cheapest = min(cands, key=lambda c: c.cost_usd)
    assert fastest.cost_usd > cheapest.cost_usd and fastest.time_s < cheapest.time_s
    out = choose(cands, make_objective("cost"), Constraints(deadline_s=fastest.time_s * 1.001, budget_usd=cheapest.cost_usd * 1.001))
    assert not out.feasible
    assert set(out.binding) == {"deadline_s", "budget_usd"}


def test_bad_objective_and_constraints_are_user_errors():
    with pytest.raises(UserError, match="cost, speed, balanced"):
        make_objective("cheapest")
    with pytest.raises(UserError, match="weight"):
        make_objective("balanced", weight=1.5)
    with pytest.raises(UserError, match="deadline"):
        Constraints(deadline_s=-1)
    with pytest.raises(UserError):
        Constraints(budget_usd=math.inf)


def test_progress_model_matches_mccandlish_relations():
    p = ProgressModel.calibrate(b_noise=500.0, e_ref=100_000.0, b_ref=4000.0)
    assert p.env_steps(4000) == pytest.approx(100_000.0)
    for b in (100, 1000, 10_000):
        assert p.env_steps(b) == pytest.approx(p.updates(b) * b)
    assert p.env_steps(1) == pytest.approx(p.e_min, rel=0.01)
    assert p.updates(1e9) == pytest.approx(p.s_min, rel=0.01)


def test_min_steps_per_actor_prunes_tiny_fragments():
    shapes = all_shapes([1, 64], [512], [500], min_steps_per_actor=16)
    assert shapes == [RunShape(1, 512, 500)]


def test_near_ties_go_to_the_other_figure():
    from optimizers.seraph.search import TIE_TOLERANCE, Candidate

    def cand(actors, time_s, cost):
        return Candidate(RunShape(actors, 1769, 1024), 10, 10_240, time_s, cost)

    fast_dear, close_cheap, slow_cheapest = cand(4, 10.0, 3.0), cand(2, 10.0 * (1 + TIE_TOLERANCE / 2), 2.0), cand(1, 12.0, 1.9)
    cands = [fast_dear, close_cheap, slow_cheapest]
    assert choose(cands, make_objective("speed")).best == close_cheap  # 1.5% slower on paper is a tie; it is cheaper
    assert choose(cands, make_objective("cost")).best == slow_cheapest  # 5% dearer than the cheapest is not a tie
    # a deadline the near-tie misses still rules it out
    assert choose(cands, make_objective("speed"), Constraints(deadline_s=10.0)).best == fast_dear
