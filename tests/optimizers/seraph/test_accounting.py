"""What a fresh pilot's bill counts as tuning, and what as the run's own."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from optimizers.seraph.accounting import _fresh_pilot_bill
from optimizers.seraph.models import Observation, Prices
from serverless.run_shape import RunShape
from optimizers.seraph.search import Candidate
from optimizers.seraph.workload_profile import PilotSummary

PRICES = Prices(gb_second_usd=1.0e-5, request_usd=0.0, learner_usd_per_s=1.0e-4)


def _pilot(cold_init_s: float, top: int = 4, memory_mb: int = 1769) -> SimpleNamespace:
    cold = Observation(RunShape(top, memory_mb, 1024), rollout_s=0.3, billed_s=0.01, learner_s=0.02, iteration_s=0.32, cold=True)
    warm = Observation(RunShape(top, memory_mb, 1024), rollout_s=0.03, billed_s=0.01, learner_s=0.02, iteration_s=0.05)
    summary = PilotSummary(iterations=2, env_steps=2048, cost_usd=1e-4, training_cost_usd=1e-4, cold_init_s=cold_init_s,
                           memory_probe={"cost_usd": 0.0})
    return SimpleNamespace(profile=SimpleNamespace(pilot=summary, observations=[cold, warm]))


def _plan(actors: int, memory_mb: int = 1769) -> SimpleNamespace:
    best = Candidate(RunShape(actors, memory_mb, 1024), iterations=40, env_steps=40960, time_s=2.0, cost_usd=1.0)
    return SimpleNamespace(outcome=SimpleNamespace(best=best), prices=PRICES)


def test_the_runs_own_functions_init_is_not_tuning() -> None:
    """The pilot started 4 cold functions; a run of 2 reuses 2 of them warm, so their INIT
    is the run's own, as the learner's wait for the cold start is."""
    wait_usd = (0.32 - 0.05) * PRICES.learner_usd_per_s
    init_usd = 0.36 * 1769 / 1024 * PRICES.gb_second_usd
    no_init = _fresh_pilot_bill(_pilot(0.0), _plan(2))
    assert no_init.cold_start_credit_usd == pytest.approx(wait_usd)
    two = _fresh_pilot_bill(_pilot(0.36), _plan(2))
    assert two.cold_start_credit_usd == pytest.approx(wait_usd + 2 * init_usd)
    # a run wider than the pilot starts the rest cold itself: only the pilot's 4 are credited
    assert _fresh_pilot_bill(_pilot(0.36), _plan(8)).cold_start_credit_usd == pytest.approx(wait_usd + 4 * init_usd)
    # another memory size is a new version: the run's functions start cold again, no INIT credit
    assert _fresh_pilot_bill(_pilot(0.36), _plan(2, memory_mb=3008)).cold_start_credit_usd == pytest.approx(wait_usd)


def test_the_pilot_summary_keeps_its_cold_init_and_an_older_profile_reads_none() -> None:
    s = PilotSummary(cold_init_s=0.36)
    assert PilotSummary.from_dict(s.as_dict()).cold_init_s == 0.36
    older = {k: v for k, v in s.as_dict().items() if k != "cold_init_s"}
    assert PilotSummary.from_dict(older).cold_init_s == 0.0


def test_the_pilot_reads_the_mean_init_of_its_cold_functions() -> None:
    from optimizers.seraph.pilot import _cold_init_s

    assert _cold_init_s({"cold_starts": 4, "init_ms_total": 1440.0}) == pytest.approx(0.36)
    assert _cold_init_s({"cold_starts": 0, "init_ms_total": 0.0}) == 0.0
