"""The modelled Lambda clock on hand-made durations."""

from __future__ import annotations

import pytest

from serverless.lambda_clock import ModelledInvocation, cpu_share, model_batch, modelled_duration_ms


def test_cpu_share_is_memory_over_1769() -> None:
    assert cpu_share(1769) == pytest.approx(1.0)
    assert cpu_share(128) == pytest.approx(128 / 1769)
    assert cpu_share(10240) == pytest.approx(10240 / 1769)


def test_duration_scales_with_share_below_one_vcpu_only() -> None:
    assert modelled_duration_ms(ModelledInvocation(cpu_ms=100, cpu_share=0.5)) == pytest.approx(200)
    assert modelled_duration_ms(ModelledInvocation(cpu_ms=100, cpu_share=1.0)) == pytest.approx(100)
    # a single-threaded handler gains nothing above one vCPU
    assert modelled_duration_ms(ModelledInvocation(cpu_ms=100, cpu_share=3.0)) == pytest.approx(100)


def test_all_concurrent_batch_is_the_slowest_invocation() -> None:
    invs = [ModelledInvocation(cpu_ms=ms, cpu_share=0.5) for ms in (10, 40, 20, 30)]
    out = model_batch(invs, concurrency=4, invoke_overhead_ms=5, cold_start_ms=100)
    assert out.durations_ms == pytest.approx([20, 80, 40, 60])
    assert out.batch_s == pytest.approx((5 + 80) / 1000)
    assert out.label == "modelled"


def test_bounded_concurrency_schedules_on_free_slots() -> None:
    # busy times (overhead 0): 10, 40, 20, 30 on 2 slots, in order:
    # slot A: 10, then 20 (ends 30), then 30 (ends 60); slot B: 40 (ends 40) -> makespan 60
    invs = [ModelledInvocation(cpu_ms=ms, cpu_share=1.0) for ms in (10, 40, 20, 30)]
    out = model_batch(invs, concurrency=2, invoke_overhead_ms=0, cold_start_ms=0)
    assert out.batch_s == pytest.approx(0.060)
    assert model_batch(invs, concurrency=1, invoke_overhead_ms=0, cold_start_ms=0).batch_s == pytest.approx(0.100)


def test_cold_starts_add_sandbox_and_init_time() -> None:
    invs = [
        ModelledInvocation(cpu_ms=50, cpu_share=1.0, cold=True, init_ms=300),
        ModelledInvocation(cpu_ms=200, cpu_share=1.0),
    ]
    out = model_batch(invs, concurrency=2, invoke_overhead_ms=10, cold_start_ms=150)
    assert out.busy_ms == pytest.approx([10 + 150 + 300 + 50, 10 + 200])
    assert out.batch_s == pytest.approx(0.510)
    # init is not billed: the billable durations exclude it
    assert out.durations_ms == pytest.approx([50, 200])


def test_bad_concurrency() -> None:
    with pytest.raises(ValueError):
        model_batch([ModelledInvocation(1, 1.0)], concurrency=0)
