"""The scale benchmark's pieces: gap cases stay in their ranges, the growth slope, and merging split runs."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from benchmarks.intunex_scale import gap_case, merge, slope


def test_gap_cases_are_20_to_100_nodes_with_no_more_jobs_than_nodes() -> None:
    for seed in range(5000, 5048):
        nodes, jobs, types = gap_case(seed)
        assert 20 <= nodes <= 100 and 5 <= jobs <= min(40, nodes) and 4 <= types <= 12
    assert gap_case(5000) == gap_case(5000)


def test_slope_of_a_power_law_is_its_exponent() -> None:
    xs = [10.0, 100.0, 1000.0]
    assert slope(xs, [3 * x ** 1.5 for x in xs]) == pytest.approx(1.5)
    assert slope([1.0], [1.0]) is None


def test_merge_takes_finished_and_partial_runs(tmp_path: Path) -> None:
    def case(seed: int, gap: float) -> dict:
        return {"seed": seed, "nodes": 20, "jobs": 5, "types": 4, "all_fed": True, "usd_per_h": 1.0, "gap_to_bound": gap,
                "plan_s": 1.0, "plan_cpu_s": 1.0, "bound": {"usd_per_h": 1.0 - gap, "proven_optimal": True, "solve_s": 0.1}}

    a, b = tmp_path / "a.json", tmp_path / "b.json"
    a.write_text(json.dumps({"gap_partial": {"cases": [case(1, 0.0), case(2, 0.04)]}}))
    b.write_text(json.dumps({"gap": {"cases": [case(3, 0.01)]}}))
    summary = merge([str(a), str(b)])["summary"]
    assert summary["cases"] == 3 and summary["median_gap"] == pytest.approx(0.01) and summary["worst_gap"] == 0.04
    assert summary["at_bound"] == 1 and summary["seeds"] == [1, 3]
