"""The Plumber-style LP on hand-made profiles with known answers, and the AUTOTUNE model."""

from __future__ import annotations

import pytest

from ingestion.knobs import Knob, KnobSpace
from ingestion.node import Node
from ingestion.simulator import PipelineModel, StageModel
from optimizers.baselines.autotune_model import hill_climb
from optimizers.baselines.plumber import make_plumber_optimizer, plumber_plan, solve_lp


def test_lp_balances_rates():
    # rates 100, 200, 400 rows/s per core, 7 cores: t = 100 a = 200 b = 400 c, a + b + c = 7
    t, theta = solve_lp([100.0, 200.0, 400.0], [True, True, True], 7.0)
    assert t == pytest.approx(400.0)
    assert theta == pytest.approx([4.0, 2.0, 1.0])


def test_lp_respects_sequential_stage_cap():
    # a sequential stage at 300 rows/s caps the pipeline even with many cores
    t, theta = solve_lp([100.0, 300.0], [True, False], 16.0)
    assert t == pytest.approx(300.0)
    assert theta[1] <= 1.0 + 1e-9


def _three_stage() -> tuple[PipelineModel, KnobSpace, Node]:
    # per-thread costs 4 ms, 2 ms, 1 ms per row -> rates 250, 500, 1000 rows/s; 7 cores -> 4/2/1
    model = PipelineModel(
        "hand",
        (
            StageModel("a", 4e-3, threads_knob="a"),
            StageModel("b", 2e-3, threads_knob="b"),
            StageModel("c", 1e-3, threads_knob="c"),
        ),
        burstiness=0.0,
        oversub_overhead=0.0,
    )
    values = tuple(range(1, 8))
    space = KnobSpace(tuple(Knob(n, values, kind="cpu", stage=n) for n in "abc"), cpu_budget=7)
    return model, space, Node("n7", vcpus=7, ram_gib=8)


def test_plumber_plan_rounds_to_the_known_answer():
    model, space, node = _three_stage()
    plan = plumber_plan(space, node, model)
    assert plan["config"] == {"a": 4, "b": 2, "c": 1}
    assert plan["lp_rows_per_s"] == pytest.approx(1000.0)
    opt = make_plumber_optimizer(space, node, model)
    assert opt.ask() == {"a": 4, "b": 2, "c": 1}
    assert opt.ask() is None


def test_plumber_rounding_hands_spare_budget_to_the_bottleneck():
    model, space, node = _three_stage()
    space8 = KnobSpace(space.knobs, cpu_budget=8)
    plan = plumber_plan(space8, Node("n8", vcpus=8, ram_gib=8), model)
    assert space8.cpu_used(plan["config"]) == 8
    assert plan["config"]["a"] == 5  # the slowest stage gets the spare core


def test_autotune_model_hill_climb_stays_in_space_and_finds_balance():
    model, space, node = _three_stage()
    config, info = hill_climb(model, space, node)
    assert space.is_valid(config)
    assert config == {"a": 4, "b": 2, "c": 1}
    assert "model" in info["label"]
