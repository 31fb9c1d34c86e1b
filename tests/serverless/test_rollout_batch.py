"""What an iteration's rollout summary says of its invocations."""

from serverless.invocation import BillingRecord, Invocation, InvokeBatch
from serverless.rollout_batch import best_handler_cpu_share, handler_cpu_share, rollout_summary


def _inv(cpu_ms: float | None, total_ms: float, error: str | None = None) -> Invocation:
    bill = BillingRecord(billed_ms=int(total_ms), duration_ms=total_ms, init_ms=0.0, memory_mb=1769, error=error)
    timings = {"total_ms": total_ms, **({"cpu_ms": cpu_ms} if cpu_ms is not None else {})}
    return Invocation(None if error else {"timings": timings}, bill)


def _batch(*invs: Invocation) -> InvokeBatch:
    return InvokeBatch(list(invs), wall_s=0.1, lambda_s=0.1, lambda_s_label="modelled", concurrency=len(invs))


def test_the_handlers_cpu_share_is_their_cpu_time_over_their_duration():
    batch = _batch(_inv(90.0, 100.0), _inv(50.0, 100.0))
    assert handler_cpu_share(batch) == 0.7
    assert rollout_summary(batch)["handler_cpu_share"] == 0.7
    assert best_handler_cpu_share(batch) == 0.9  # the call that had a CPU to itself
    assert rollout_summary(batch)["handler_cpu_share_best"] == 0.9


def test_time_queued_for_a_cpu_is_not_the_handlers():
    def queued(cpu_ms: float, total_ms: float, queued_ms: float) -> Invocation:
        inv = _inv(cpu_ms, total_ms)
        inv.result["timings"]["queued_ms"] = queued_ms
        return inv

    batch = _batch(queued(20.0, 100.0, 80.0), queued(45.0, 100.0, 50.0))  # a loaded host: both waited for a CPU
    assert handler_cpu_share(batch) == 65.0 / 70.0
    assert best_handler_cpu_share(batch) == 1.0


def test_failed_calls_and_calls_without_timings_do_not_count():
    assert handler_cpu_share(_batch(_inv(95.0, 100.0), _inv(None, 0.0, error="boom"))) == 0.95
    assert handler_cpu_share(_batch(_inv(None, 0.0, error="boom"))) is None
    assert best_handler_cpu_share(_batch(_inv(95.0, 100.0), _inv(100.0, 90.0, error="boom"))) == 0.95
    assert best_handler_cpu_share(_batch(_inv(None, 0.0, error="boom"))) is None
