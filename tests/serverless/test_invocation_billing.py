"""What an invocation is charged: its duration and, on a cold start, its INIT phase."""

from serverless.invocation import BillingRecord


def test_a_modelled_cold_start_is_charged_its_init_and_a_warm_one_nothing_more() -> None:
    cold = BillingRecord(billed_ms=120, duration_ms=119.2, init_ms=350.4, memory_mb=1769, cold_start=True)
    warm = BillingRecord(billed_ms=120, duration_ms=119.2, init_ms=0.0, memory_mb=1769)
    assert cold.charged_ms == 120 + 351 and warm.charged_ms == 120


def test_a_real_bill_already_includes_init() -> None:
    """A REPORT line's Billed Duration includes INIT: adding it again would count it twice."""
    bill = BillingRecord(billed_ms=470, duration_ms=119.2, init_ms=350.4, memory_mb=1769, label="billed")
    assert bill.charged_ms == 470
