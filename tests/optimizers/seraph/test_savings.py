"""A saving split by its source adds up to the difference of the two bills."""

import pytest
from hypothesis import given, strategies as st

from optimizers.seraph.savings import Bill, split_saving

money = st.floats(1e-6, 1e-2)


@given(st.integers(1000, 10**6), money, money, st.floats(0, 1e-3), st.integers(1000, 10**6), money, money)
def test_the_parts_add_up_to_the_difference(e, fn, lr, o, e0, fn0, lr0) -> None:
    run, base = Bill(e, fn, lr, o), Bill(e0, fn0, lr0, 0.0)
    assert split_saving(run, base).total_usd == pytest.approx(run.total_usd - base.total_usd, rel=1e-9, abs=1e-15)


def test_each_source_is_its_own_part() -> None:
    base = Bill(1000, 0.010, 0.010, 0.0)
    assert split_saving(Bill(500, 0.005, 0.005, 0.0), base).to_dict()["env_steps_usd"] == pytest.approx(-0.010)
    only_learner = split_saving(Bill(1000, 0.010, 0.004, 0.0), base)
    assert only_learner.learner_usd == pytest.approx(-0.006) and only_learner.env_steps_usd == 0 == only_learner.functions_usd
    assert split_saving(Bill(1000, 0.010, 0.010, 0.002), base).tuning_usd == pytest.approx(0.002)


def test_a_bill_reads_both_result_shapes() -> None:
    lines = [{"component": "function_gb_s", "usd": 3e-5}, {"component": "requests", "usd": 1e-6},
             {"component": "learner_vm", "usd": 2e-5}]
    tuned = Bill.of_result({"achieved": {"env_steps": 100, "cost_usd": 6.1e-5}, "training": {"ledger": {"lines": lines}}})
    assert tuned.functions_usd == pytest.approx(3.1e-5) and tuned.tuning_usd == pytest.approx(1e-5)
    trained = Bill.of_result({"env_steps": 100, "cost_usd": 5.1e-5, "ledger": {"lines": lines}})
    assert trained.tuning_usd == pytest.approx(0.0, abs=1e-12)
