"""Task helpers that need no Prefect server: the branch concurrency decision, the
progress-reporting backend, report rendering helpers and the profile cache policy's
hardware part (retry classification: ``test_retry.py``)."""

from __future__ import annotations

from typing import Any

import pytest

from serverless.invocation import BillingRecord, Invocation, InvokeBatch
from tasks import branches
from tasks.progress import ReportingBackend
from tasks.report import fmt, md_table


@pytest.mark.parametrize(
    ("mode", "cores", "n", "parallel"),
    [
        ("auto", 2, 2, False),
        ("auto", 4, 2, True),
        ("auto", 16, 1, False),
        ("parallel", 2, 2, True),
        ("sequential", 16, 2, False),
    ],
)
def test_branch_concurrency_decision(monkeypatch: pytest.MonkeyPatch, mode: str, cores: int, n: int, parallel: bool) -> None:
    monkeypatch.setattr(branches, "usable_cores", lambda: cores)
    got, why = branches.branches_in_parallel(mode, n)  # type: ignore[arg-type]
    assert got is parallel
    assert why


class _Inner:
    name = "fake"

    def __init__(self) -> None:
        self.closed = False

    def invoke(self, events: list[dict[str, Any]], memory_mb: int, concurrency: int | None = None) -> InvokeBatch:
        bill = BillingRecord(billed_ms=10, duration_ms=9.5, init_ms=0.0, memory_mb=memory_mb)
        invs = [Invocation({"env_steps": e["num_steps"], "episode_returns": [float(e["num_steps"])]}, bill) for e in events]
        invs.append(Invocation(None, BillingRecord(10, 10.0, 0.0, memory_mb, error="boom")))
        return InvokeBatch(invs, wall_s=0.1, lambda_s=0.1, lambda_s_label="modelled", concurrency=len(events))

    def close(self) -> None:
        self.closed = True


def test_reporting_backend_counts_steps_and_returns_then_delegates() -> None:
    seen: list[tuple[int, float | None]] = []
    inner = _Inner()
    backend = ReportingBackend(inner, lambda steps, ret: seen.append((steps, ret)), window=2)
    batch = backend.invoke([{"num_steps": 10}, {"num_steps": 30}], 1769, 2)
    assert len(batch.invocations) == 3  # passed through unchanged, errors included
    backend.invoke([{"num_steps": 50}], 1769)
    assert seen == [(40, 20.0), (90, 40.0)]  # window of 2 episodes: (30 + 50) / 2
    backend.close()
    assert inner.closed


def test_reporting_backend_survives_a_failing_callback() -> None:
    calls: list[int] = []

    def broken(steps: int, ret: float | None) -> None:
        calls.append(steps)
        raise RuntimeError("API down")

    backend = ReportingBackend(_Inner(), broken)
    first = backend.invoke([{"num_steps": 5}], 512)
    second = backend.invoke([{"num_steps": 7}], 512)
    assert [inv.result for inv in first.invocations][0] == {"env_steps": 5, "episode_returns": [5.0]}
    assert len(second.invocations) == 2  # the batch still comes back after the callback failed
    assert calls == [5, 12]  # the callback keeps being called, with the running step count


def test_report_helpers() -> None:
    assert fmt(None) == "-" and fmt(True) == "yes" and fmt(12345.6) == "12,346" and fmt(0.000123456) == "0.0001235"
    table = md_table([{"a": 1, "b": "x|y"}], ["a", "b"])
    assert table.splitlines() == ["| a | b |", "|---|---|", "| 1 | x\\|y |"]


def test_hardware_is_part_of_the_profile_cache_key(monkeypatch: pytest.MonkeyPatch) -> None:
    from tasks import caching

    policy = caching.HardwareFingerprint()
    here = policy.compute_key(None, {}, {})  # type: ignore[arg-type]
    monkeypatch.setattr(caching.paths, "hardware_fingerprint", lambda: "another-machine")
    assert policy.compute_key(None, {}, {}) != here  # type: ignore[arg-type]


def test_reporting_worker_reports_each_measurement() -> None:
    from ingestion.measurement import Measurement
    from tasks.progress import ReportingWorker

    class _Worker:
        closed = False

        def measure(self, config: dict[str, int], **kw: Any) -> Measurement:
            return Measurement(rows_per_s=float(config["x"]) * kw.get("scale", 1))

        def close(self) -> None:
            self.closed = True

    inner, seen = _Worker(), []
    worker = ReportingWorker(inner, lambda m: seen.append(m.rows_per_s))
    assert worker.measure({"x": 3}, scale=2).rows_per_s == 6.0
    assert seen == [6.0]
    worker.close()
    assert inner.closed
