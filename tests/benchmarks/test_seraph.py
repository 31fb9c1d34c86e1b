"""The Seraph benchmark's oracle: ranked grid shapes, and re-measured side by side."""

from __future__ import annotations


import pytest

from benchmarks.seraph import _use_grid, oracle_candidates
from optimizers.rl_baselines.grid import oracle, ranked_shapes
from serverless.run_shape import RunShape


def _row(shape, seed, cost, time_s, reached=True):
    a, m, b = shape
    return {"config": {"actors": a, "memory_mb": m, "batch": b}, "seed": seed, "cost_usd": cost,
            "lambda_time_s": time_s, "reached": reached}


GRID = [
    *(_row((1, 1769, 1024), s, c, 6.0) for s, c in enumerate((1.0, 2.0, 3.0))),  # median cost 2.0
    *(_row((4, 1769, 1024), s, c, 5.0) for s, c in enumerate((1.5, 1.8, 9.0))),  # median cost 1.8, fastest
    *(_row((4, 3008, 1024), s, 2.5, 5.5) for s in range(3)),
    *(_row((1, 885, 512), s, 0.5, 9.0, reached=(s != 1)) for s in range(3)),  # cheapest but missed a seed
]


def test_ranked_shapes_order_by_median_and_skip_shapes_that_missed_the_target():
    ranked = [tuple(o["config"].values()) for o in ranked_shapes(GRID, "cost")]
    assert ranked == [(4, 1769, 1024), (1, 1769, 1024), (4, 3008, 1024)]
    assert oracle(GRID, "speed")["config"] == {"actors": 4, "memory_mb": 1769, "batch": 1024}


def test_oracle_candidates_are_the_union_of_each_objectives_top_k():
    assert oracle_candidates(GRID, 1) == [RunShape(4, 1769, 1024)]
    assert oracle_candidates(GRID, 2) == [RunShape(4, 1769, 1024), RunShape(1, 1769, 1024), RunShape(4, 3008, 1024)]


def test_the_remeasured_runs_decide_the_oracle_and_the_grids_pick_is_kept():
    again = [*(_row((4, 1769, 1024), s, 2.2, 5.2) for s in range(3)), *(_row((1, 1769, 1024), s, 2.1, 6.1) for s in range(3))]
    res = {"oracle_remeasured_runs": again}
    _use_grid(res, GRID, "earlier.json", 2)
    assert res["oracle_as_in_grid"]["cost"]["median"] == 1.8
    assert res["oracle"]["cost"]["config"]["actors"] == 1 and res["oracle"]["cost"]["median"] == 2.1
    assert res["oracle"]["speed"]["median"] == 5.2 and "re-measured" in res["oracle"]["speed"]["rule"]
    plain = {}
    _use_grid(plain, GRID, "earlier.json", 0)
    assert plain["oracle"]["cost"]["median"] == 1.8 and "oracle_as_in_grid" not in plain


def test_an_out_of_sample_oracle_says_so_and_grid_seeds_need_a_rerun(tmp_path, capsys):
    from benchmarks.seraph import main

    again = [_row((4, 1769, 1024), s, 2.2, 5.2) for s in (3, 4, 5)]
    res = {"oracle_remeasured_runs": again}
    _use_grid(res, GRID, "earlier.json", 1, out_of_sample=True)
    assert "out of sample" in res["oracle"]["cost"]["rule"]
    with pytest.raises(SystemExit):
        main(["--envs", "CartPole-v1", "--seeds", "3", "--grid-from", str(tmp_path / "g.json"), "--grid-seeds", "0"])
    assert "--oracle-top" in capsys.readouterr().err


def _run(method, seed, steps, cost, time_s):
    return {"method": method, "seed": seed, "env_steps": steps, "cost_usd": cost, "lambda_time_s": time_s,
            "wall_s": time_s, "reached": True, "model_check": {"iteration_time_median_abs_error": None}}


def test_env_steps_against_the_oracle_are_reported_beside_the_clocked_ratios(tmp_path, capsys):
    import json

    from benchmarks.seraph import main, summarise

    # Seraph's cost runs take the oracle's steps exactly but a slower clock phase makes them
    # cost 1.5x: the clocked ratio says 1.5, the step ratio 1.0
    oracle_runs = [{**_row((1, 1769, 1024), s, 2.0, 4.0), "env_steps": n} for s, n in zip(range(3), (100, 200, 300))]
    res = {"env": "CartPole-v1", "oracle_remeasured_runs": oracle_runs,
           "runs": [*(_run("seraph_cost", s, n, 3.0, 6.0) for s, n in zip(range(3), (100, 200, 300))),
                    *(_run("seraph_speed", s, n, 3.0, 6.0) for s, n in zip(range(3), (300, 400, 500)))]}
    _use_grid(res, GRID, "earlier.json", 1)
    bars = summarise(res)["bars"]
    assert bars["cost_objective_vs_oracle"] == pytest.approx(1.5)
    assert bars["cost_objective_env_steps_vs_oracle"] == pytest.approx(1.0)
    assert bars["speed_objective_env_steps_vs_oracle"] == pytest.approx(2.0)
    assert "cost_objective_cached_profile_env_steps_vs_oracle" not in bars  # no cached runs
    # --rescore prints a saved result's summary without training
    saved = tmp_path / "r.json"
    saved.write_text(json.dumps({"envs": [res]}))
    assert main(["--rescore", str(saved)]) == 0
    assert "cost_objective_env_steps_vs_oracle: 1.000" in capsys.readouterr().out
    with pytest.raises(SystemExit, match="not a readable seraph benchmark result"):
        main(["--rescore", str(tmp_path / "missing.json")])


def test_fresh_only_runs_no_cached_profile_twins(monkeypatch):
    import benchmarks.seraph as bench
    from optimizers.rl_baselines import static as rl_static

    calls = []

    def fake_seraph(env, seed, objective, target, max_steps, cached, steps_per_env=128, ignore_references=False):
        calls.append((seed, objective, cached))
        row = _run(f"seraph_{objective}" + ("_cached_profile" if cached else ""), seed, 1000, 1.0, 1.0)
        return {**row, "tuning_cost_usd": 0.0 if cached else 0.05, "net_tuning_cost_usd": 0.0 if cached else 0.02}

    monkeypatch.setattr(bench, "_seraph", fake_seraph)
    monkeypatch.setattr(rl_static, "run_static", lambda workload, target_reward, seed: _run("static_default", seed, 1000, 2.0, 2.0))
    both = bench.run_env("CartPole-v1", [0], False, None, methods=("static", "seraph"))
    assert sorted(c[2] for c in calls) == [False, False, True, True]
    calls.clear()
    fresh = bench.run_env("CartPole-v1", [0, 1], False, None, methods=("static", "seraph"), cached_twins=False)
    assert calls == [(0, "cost", False), (0, "speed", False), (1, "cost", False), (1, "speed", False)]
    assert not any(r["method"].endswith("_cached_profile") for r in fresh["runs"])
    assert len(both["runs"]) == 5 and len(fresh["runs"]) == 6
    # the summary reads a fresh-only run: static bars, no cached-profile bars
    bars = bench.summarise(fresh)["bars"]
    assert bars["cost_objective_cost_ratio_vs_static"] == pytest.approx(0.5)
    assert bars["tuning_overhead_net_share_of_saving"] == pytest.approx(0.02)
    assert not any("cached_profile" in k for k in bars)


def test_every_benchmark_env_has_a_preset_and_slot_references_to_its_target():
    from benchmarks.seraph import TARGETS, WITHOUT_REFERENCES
    from optimizers.seraph.pilot import DEFAULT_STEPS_PER_ENV
    from optimizers.seraph.references import measured_reference
    from serverless.presets import has_preset

    assert "Pendulum-v1" in TARGETS and set(WITHOUT_REFERENCES) <= set(TARGETS)
    for env in WITHOUT_REFERENCES:  # the benchmark's check of planning without references
        user_module = ":" in env  # a user's own env: the default PPO settings, as for any unknown env
        assert (user_module or has_preset(env)) and measured_reference(env, DEFAULT_STEPS_PER_ENV) is None, env
    for env, target in TARGETS.items():
        if env in WITHOUT_REFERENCES:
            continue
        ref = measured_reference(env, DEFAULT_STEPS_PER_ENV)
        assert has_preset(env) and ref["steps_per_env"] == DEFAULT_STEPS_PER_ENV and ref["target_reward"] == target, env


def test_the_grid_is_put_against_the_static_default_on_the_same_seeds(capsys):
    from benchmarks.seraph import print_table, summarise

    static = [_run("static_default", s, n, c, t) for s, n, c, t in ((0, 100, 2.0, 4.0), (1, 200, 4.0, 8.0), (2, 300, 6.0, 12.0))]
    # (2, 1769, 1000) halves every figure, but its seed 2 costs 1.5x that seed's static run;
    # (8, 1769, 4000) is the fastest and dearest; (1, 885, 512) is cheapest but missed seed 1
    grid = [
        *({**_row((2, 1769, 1000), s, c, t), "env_steps": n} for s, c, t, n in ((0, 1.0, 2.0, 50), (1, 2.0, 4.0, 100), (2, 9.0, 6.0, 150))),
        *({**_row((8, 1769, 4000), s, 8.0, 1.0), "env_steps": 200} for s in range(3)),
        *({**_row((1, 885, 512), s, 0.1, 20.0, reached=(s != 1)), "env_steps": 10} for s in range(3)),
    ]
    res = {"env": "Acrobot-v1", "runs": static, "grid": grid, "oracle": {}}
    summary = summarise(res)
    rows = {tuple(r["config"].values()): r for r in summary["grid_vs_static"]}
    half = rows[(2, 1769, 1000)]
    assert half["cost_vs_static"] == pytest.approx(0.5) and half["time_vs_static"] == pytest.approx(0.5)
    assert half["env_steps_vs_static"] == pytest.approx(0.5) and half["worst_seed_cost_vs_static"] == pytest.approx(1.5)
    assert [tuple(r["config"].values()) for r in summary["grid_vs_static"]][0] == (1, 885, 512)  # cheapest first
    # the best of the grid counts only shapes that reached the target on every seed
    assert summary["bars"]["grid_best_cost_vs_static"] == pytest.approx(0.5)
    assert summary["bars"]["grid_best_speed_vs_static"] == pytest.approx(0.125)
    print_table("Acrobot-v1", summary, {})
    out = capsys.readouterr().out
    assert "grid against the static default" in out and "2/3" in out  # the shape that missed a seed
    assert summarise({"runs": static, "oracle": {}})["grid_vs_static"] == []  # no grid, no rows
