"""The suite benchmark's simulated path and its summary (tiny budget; no timing)."""

from __future__ import annotations

import pytest

from benchmarks.intune_suite import SimSettings, main, sim_case, sim_oracle, simulate_suite, summarise, table
from ingestion.pipelines import member


def test_simulated_runs_are_scored_against_the_grid_and_autotune():
    result = simulate_suite(["clicks-csv"], ["hillclimb", "autotune", "plumber"], 1, SimSettings(budget_s=45.0))
    runs = result["runs"]
    assert result["label"] == "simulated" and {r["optimizer"] for r in runs} == {"hillclimb", "autotune", "plumber"}
    for r in runs:
        assert 0.0 <= r["vs_grid"] <= 1.0 + 1e-9  # nothing beats the noise-free grid on the truth
        assert r["tuning_s"] <= 45.0 + 1e-9
    hill = next(r for r in runs if r["optimizer"] == "hillclimb")
    assert hill["trials"] == 45 // 4.5
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
