"""The suite benchmark's simulated path and its summary (tiny budget; no timing)."""

from __future__ import annotations

import pytest

from benchmarks.intune_suite import (SimSettings, main, reach_table, sim_case, sim_oracle, simulate_suite, summarise, table,
                                    time_to_quality)
from ingestion.pipelines import member


def test_simulated_runs_are_scored_against_the_grid_and_autotune():
    result = simulate_suite(["clicks-csv"], ["hillclimb", "autotune", "plumber"], 1, SimSettings(budget_s=45.0))
    runs = result["runs"]
    assert result["label"] == "simulated" and {r["optimizer"] for r in runs} == {"hillclimb", "autotune", "plumber"}
    for r in runs:
        assert 0.0 <= r["vs_grid"] <= 1.0 + 1e-9  # nothing beats the noise-free grid on the truth
        assert r["tuning_s"] <= 45.0 + 1e-9
    hill = next(r for r in runs if r["optimizer"] == "hillclimb")
    assert hill["trials"] == 45 // 4.5 and len(hill["history"]) == hill["trials"]
    auto = next(r for r in runs if r["optimizer"] == "autotune")
    assert auto["vs_autotune"] == pytest.approx(1.0)
    summary = summarise(runs)
    assert set(summary["per_pipeline"]["clicks-csv"]) == {"hillclimb", "autotune", "plumber"}
    assert summary["overall"]["heldout"]["hillclimb"]["runs"] == 1
    assert "[simulated]" in table(summary, "simulated")


def test_the_case_truth_and_belief_differ_and_the_oracle_skips_failures():
    case = sim_case(member("clicks-csv"), 0, SimSettings(vcpus=8))
    assert case.truth != case.belief and case.belief.core_contention == 0.0
    best, x = sim_oracle(case)
    assert x > 0 and not case.member.rejects(best)


def test_bad_arguments_are_one_line_errors(capsys):
    assert main(["--simulate", "--pipelines", "nope"]) == 2
    assert "unknown ['nope']" in capsys.readouterr().err


@pytest.mark.slow
def test_the_measured_path_tunes_and_scores_side_by_side(tmp_path):
    """The live path end to end on a small pipeline: a short tuning run, AUTOTUNE, then the
    picks measured side by side (the figures are measured; only their shape is checked)."""
    from benchmarks.intune_suite import live_pipeline

    lines: list[str] = []
    rows = live_pipeline(member("clicks-csv"), tmp_path, ["autotune", "hillclimb"], seeds=1, budget_s=8.0, rounds=1,
                         grid=False, log=lines.append)
    assert {r["optimizer"] for r in rows} == {"autotune", "hillclimb"}
    hill = next(r for r in rows if r["optimizer"] == "hillclimb")
    assert hill["trials"] >= 1 and hill["rows_per_s"] > 0 and hill["vs_grid"] is None
    assert hill["vs_autotune"] == pytest.approx(hill["rows_per_s"] / hill["autotune_rows_per_s"])
    assert any("hillclimb seed 0" in line for line in lines)
    assert len(hill["history"]) == hill["trials"]  # every trial on record, in order, so a pick can be traced
    assert [h["elapsed_s"] for h in hill["history"]] == sorted(h["elapsed_s"] for h in hill["history"])
    assert hill["config"] in [h["config"] for h in hill["history"]]


def test_a_live_run_that_finds_nothing_is_scored_zero_not_lost(tmp_path, monkeypatch):
    """One optimizer's run ends without a configuration that runs: the benchmark keeps its trials
    and scores it 0 instead of stopping (the tuning and the side-by-side are stubbed: no timing)."""
    import benchmarks.intune_suite as suite
    import optimizers.tuning as tuning

    failed = [{"config": {"cycle": 1, "read": 2, "parse": 1, "prefetch": 1}, "rows_per_s": 0.0, "oom": True,
               "elapsed_s": 4.0, "failure": "memory limit"}]

    def no_configuration(spec, node, optimizer, **kw):
        raise tuning.NoRunningConfiguration(failed, "optimizer 'hillclimb' found no configuration that runs")

    monkeypatch.setattr(tuning, "tune_pipeline", no_configuration)
    monkeypatch.setattr(suite, "side_by_side", lambda spec, node, picks, rounds: {
        k: {"rows_per_s": 100.0, "peak_mb": 500.0, "oom": False} for k in picks})
    rows = suite.live_pipeline(member("clicks-csv"), tmp_path, ["autotune", "hillclimb"], seeds=2, budget_s=8.0,
                               rounds=1, grid=False, log=lambda line: None)
    hill = [r for r in rows if r["optimizer"] == "hillclimb"]
    assert [r["seed"] for r in hill] == [0, 1]
    for r in hill:
        assert r["config"] is None and r["rows_per_s"] == 0.0 and r["vs_autotune"] == 0.0 and r["oom"]
        assert r["trials"] == 1 and r["failed"] == 1 and "found no configuration" in r["error"]
    summary = summarise(rows)["per_pipeline"]["clicks-csv"]["hillclimb"]
    assert summary["failed"] == 2


def _run(optimizer, seed, trials, tuning_s=None):
    """A result row with a trial history: ``trials`` is [(config value, rows/s or None for a
    failed trial, elapsed s)]."""
    history = [{"config": {"x": c}, "rows_per_s": x or 0, "elapsed_s": t, **({} if x else {"failure": "oom"})}
               for c, x, t in trials]
    search_s = trials[-1][2] if trials else 0.0
    return {"pipeline": "p", "optimizer": optimizer, "seed": seed, "history": history, "search_s": search_s,
            "tuning_s": search_s if tuning_s is None else tuning_s}


def test_time_to_quality_judges_configurations_by_their_pooled_level_and_counts_the_set_up():
    runs = [
        # config 2 is the best by its pooled median (100, 100, 100, 300 -> 100); config 3 measured
        # 180 once (a lucky measurement of a 90-level configuration) but never three times
        _run("a", 0, [(1, 50, 5.0), (2, 100, 10.0)]),
        _run("a", 1, [(3, 180, 4.0), (2, 100, 8.0)], tuning_s=28.0),  # 20 s of set-up before its search
        _run("b", 0, [(1, 52, 4.0), (3, 90, 8.0), (2, 300, 12.0)]),
        _run("b", 1, [(1, 48, 4.0), (3, 85, 9.0)]),
        _run("b", 2, [(2, 100, 6.0), (1, None, 7.0)]),
        {"pipeline": "p", "optimizer": "autotune", "seed": 0, "tuning_s": 0.0},  # no history: left out
    ]
    ttq = time_to_quality(runs, share=0.95)["per_pipeline"]["p"]
    assert set(ttq) == {"a", "b"}
    assert ttq["a"] == {"reached": 2, "runs": 2, "median_s": 19.0, "max_s": 28.0}  # 10 s, and 20 + 8 s
    assert ttq["b"] == {"reached": 2, "runs": 3, "median_s": 9.0, "max_s": 12.0}  # 12 s, 6 s; seed 1 never
    assert "never" not in reach_table({"time_to_quality": time_to_quality(runs)}, "measured")


def test_time_to_quality_needs_a_steadily_measured_configuration():
    runs = [_run("a", 0, [(1, 50, 5.0), (2, 100, 10.0)]), _run("a", 1, [(1, 60, 5.0)])]
    assert time_to_quality(runs, min_samples=3)["per_pipeline"] == {}  # nothing measured 3 times
    assert time_to_quality(runs, min_samples=2)["per_pipeline"]["p"]["a"]["median_s"] == 5.0
