"""The real-pipeline benchmark's oracle: the grid's top configurations are re-measured side by
side and the oracle is the best of them as re-measured, not the luckiest short grid trial.
Bookkeeping only (nothing is timed here)."""

from __future__ import annotations

import sys
from pathlib import Path

# The project root, not benchmarks/ itself: benchmarks/ingestion.py would shadow the ingestion package.
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmarks.ingestion import grid_top, pick_oracle  # noqa: E402


def _trial(x: int, rows_per_s: float, oom: bool = False) -> dict:
    return {"config": {"x": x}, "rows_per_s": rows_per_s, "oom": oom}


def test_grid_top_ranks_by_grid_measurement_and_skips_failures():
    history = [_trial(1, 50.0), _trial(2, 90.0), _trial(3, 0.0, oom=True), _trial(4, 70.0), _trial(5, 0.0)]
    assert [t["config"]["x"] for t in grid_top(history, 2)] == [2, 4]
    assert [t["config"]["x"] for t in grid_top(history, 10)] == [2, 4, 1]


def test_oracle_is_the_best_re_measured_not_the_grid_noise_winner():
    top = [_trial(7, 200.0), _trial(8, 150.0), _trial(9, 140.0)]  # 7 won the grid by a lucky trial
    final = {"grid-top1": {"rows_per_s": 100.0, "rows_per_s_rounds": [100.0, 100.0]},
             "grid-top2": {"rows_per_s": 130.0, "rows_per_s_rounds": [128.0, 132.0]},
             "grid-top3": {"rows_per_s": 120.0, "rows_per_s_rounds": [120.0, 120.0]}}
    oracle = pick_oracle(top, final)
    assert oracle["chosen"] == "grid-top2" and oracle["config"] == {"x": 8}
    assert [c["grid_rows_per_s"] for c in oracle["candidates"]] == [200.0, 150.0, 140.0]
    assert max(c["side_by_side_rows_per_s"] for c in oracle["candidates"]) == 130.0
