"""The oracle-bar noise floor: resampling a perfect tuner against a best-of-k oracle."""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmarks.seraph_noise_floor import pass_probability, relative_steps  # noqa: E402


def test_no_spread_always_passes():
    r = pass_probability(np.ones(10), seeds=3, trajectories=3, draws=2_000)
    assert r["p_within_bar"] == 1.0 and r["median_ratio"] == 1.0


def test_winners_curse_grows_with_oracle_trajectories():
    rel = np.array([0.6, 0.8, 1.0, 1.0, 1.3, 1.8, 2.5])
    one = pass_probability(rel, seeds=3, trajectories=1, draws=20_000)
    three = pass_probability(rel, seeds=3, trajectories=3, draws=20_000)
    assert one["median_ratio"] == pytest.approx(1.0, abs=0.05)  # same distribution, no selection
    assert three["median_ratio"] > 1.1 and three["p_within_bar"] < one["p_within_bar"]


def test_relative_steps_pools_shapes_by_their_own_median():
    env = {"actors": 1, "runs": [{"batch": 8, "reached": True, "env_steps": s} for s in (10, 20, 20, 30, 40)],
           "by_actors": {"4": {"runs": [{"batch": 8, "reached": True, "env_steps": s} for s in (100, 200, 200, 300, 400)]}}}
    rel = relative_steps(env, 8)
    assert sorted(rel) == sorted([0.5, 1.0, 1.0, 1.5, 2.0] * 2)
    with pytest.raises(ValueError, match="batch 16"):
        relative_steps(env, 16)
