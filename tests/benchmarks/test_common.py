"""benchmarks._common: a bootstrap interval as a table cell."""

from __future__ import annotations

from benchmarks._common import fmt_interval
from optimizers.seraph.stats import bootstrap_interval


def test_an_interval_prints_as_estimate_and_ends_and_one_seed_as_its_value() -> None:
    total = bootstrap_interval([1200.0, 1500.0, 900.0, 1100.0], "sum", seed=0)
    assert fmt_interval(total, 0) == f"4,700 [{total.low:,.0f}, {total.high:,.0f}]"
    assert total.low < 4700 < total.high
    assert fmt_interval(bootstrap_interval([3.25], "mean"), 2) == "3.25"
    assert fmt_interval(None) == "-"
