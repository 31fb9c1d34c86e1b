"""benchmarks/intune_ratios.py: grid measurements over the controls around them (no timing)."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmarks.intune_ratios import control_normalised  # noqa: E402


def _real(controls, grid):
    return {"drift": {"controls": controls}, "search_history": {"grid": grid}}


def test_a_point_is_divided_by_the_controls_around_it_in_its_own_pass():
    # pass 1: controls 100 before point 0 and 200 after point 1 (the last); pass 2: 50 throughout
    controls = [{"before_trial": 0, "rows_per_s": 100.0, "pass": 1}, {"before_trial": 2, "rows_per_s": 200.0, "pass": 1},
                {"before_trial": 0, "rows_per_s": 50.0, "pass": 2}, {"before_trial": 2, "rows_per_s": 50.0, "pass": 2}]
    grid = [{"config": {"x": 1}, "rows_per_s": 0.0, "rows_per_s_passes": [125.0, 100.0], "pass_trials": [0, 1]},
            {"config": {"x": 2}, "rows_per_s": 0.0, "rows_per_s_passes": [350.0, 25.0], "pass_trials": [1, 0]}]
    got = control_normalised(_real(controls, grid))
    # x=1: pass 1 at position 0 sees control 100 + 0.25 * 100 = 125 -> 1.0; pass 2: 100 / 50 = 2.0
    assert got[(("x", 1),)] == pytest.approx((1.0 * 2.0) ** 0.5)
    # x=2: pass 1 at position 1 sees 175 -> 2.0; pass 2: 0.5 -> geometric mean 1.0
    assert got[(("x", 2),)] == pytest.approx(1.0)


def test_a_single_pass_grid_uses_its_trial_index_and_skips_failed_points():
    controls = [{"before_trial": 0, "rows_per_s": 80.0}, {"before_trial": 1, "rows_per_s": 80.0},
                {"before_trial": 2, "rows_per_s": 0.0}]  # a failed control is ignored
    grid = [{"config": {"x": 1}, "rows_per_s": 40.0}, {"config": {"x": 2}, "rows_per_s": 0.0}]
    got = control_normalised(_real(controls, grid))
    assert got == {(("x", 1),): pytest.approx(0.5)}
