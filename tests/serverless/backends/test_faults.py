"""Fault injection: the spec string, and the wrapper's AWS semantics (what runs, what is billed)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from core.errors import UserError
from serverless.backends.faults import (
    FAULT_KINDS,
    FUNCTION_ERROR,
    THROTTLE_ERROR,
    FaultInjectingBackend,
    FaultSpec,
    classify_error,
)
from serverless.invocation import BillingRecord, Invocation, InvokeBatch
from serverless.ledger import CostLedger
from serverless.pricing import PriceTable


# --------------------------------------------------------------------------- the spec string

def test_parse_reads_every_key_in_any_order() -> None:
    spec = FaultSpec.parse(" seed=7, throttle=0.1,stragglers=0.1 ,timeouts=0.05,errors=0.1,slowdown=3,timeout_s=10")
    assert spec == FaultSpec(errors=0.1, timeouts=0.05, stragglers=0.1, throttle=0.1, seed=7, slowdown=3.0, timeout_s=10.0)
    assert spec.active
    assert FaultSpec.parse(spec.describe()) == spec  # describe() reads back


def test_a_subset_leaves_the_rest_at_zero() -> None:
    spec = FaultSpec.parse("errors=0.3")
    assert (spec.errors, spec.timeouts, spec.stragglers, spec.throttle, spec.seed) == (0.3, 0.0, 0.0, 0.0, 0)
    assert not FaultSpec.parse("seed=3").active


@pytest.mark.parametrize(
    "text, match",
    [
        ("errors=2", "errors must be a rate in \\[0, 1\\)"),
        ("errors=1", "errors must be a rate in \\[0, 1\\)"),
        ("throttle=-0.1", "throttle must be a rate"),
        ("timeouts=nan", "timeouts must be finite"),
        ("stragglers=inf", "stragglers must be finite"),
        ("errors=abc", "errors='abc' is not a number"),
        ("bogus=0.1", "unknown key 'bogus'; allowed keys: errors, timeouts, stragglers, throttle"),
        ("errors", "'errors' is not key=value"),
        ("errors=", "'errors=' is not key=value"),
        ("=0.1", "is not key=value"),
        ("errors=0.1,,seed=1", "'' is not key=value"),
        ("", "give key=value pairs"),
        ("errors=0.1,errors=0.2", "errors is given twice"),
        ("seed=1.5", "seed must be a whole number"),
        ("seed=-1", "seed must be a whole number >= 0"),
        ("slowdown=1", "slowdown must be a number > 1"),
        ("timeout_s=0.5", "timeout_s must be from 1 to 900"),
        ("timeout_s=901", "timeout_s must be from 1 to 900"),
        ("errors=0.5,throttle=0.5", "must be below 1"),
    ],
)
def test_bad_specs_name_the_key_and_what_is_allowed(text: str, match: str) -> None:
    with pytest.raises(UserError, match=match):
        FaultSpec.parse(text)


def test_the_draw_is_a_function_of_seed_and_rollout_id() -> None:
    spec = FaultSpec(errors=0.2, timeouts=0.2, stragglers=0.2, throttle=0.2, seed=5)
    keys = [(i, s, q) for i in range(40) for s in range(4) for q in range(2)]
    first = [spec.draw(k) for k in keys]
    assert first == [spec.draw(k) for k in keys]
    assert first != [FaultSpec(errors=0.2, timeouts=0.2, stragglers=0.2, throttle=0.2, seed=6).draw(k) for k in keys]
    counts = {kind: first.count(kind) for kind in (*FAULT_KINDS, None)}
    assert all(30 <= n <= 100 for n in counts.values()), counts  # 320 draws, 64 expected per kind


def test_errors_are_classified_by_their_aws_text() -> None:
    assert classify_error(None) is None
    assert classify_error(THROTTLE_ERROR) == "throttle"
    assert classify_error("An error occurred (TooManyRequestsException) when calling the Invoke operation") == "throttle"
    assert classify_error("Task timed out after 3.00 seconds") == "timeouts"
    assert classify_error(FUNCTION_ERROR) == "errors"
    assert classify_error("worker process died during the invocation") == "errors"


# --------------------------------------------------------------------------- the wrapper

class CountingBackend:
    """Succeeds every time, 100 ms each; records which events actually ran."""

    name = "counting"
    timeout_s = 30.0

    def __init__(self) -> None:
        self.ran: list[list[int]] = []
        self.closed = False

    def invoke(self, events: list[dict[str, Any]], memory_mb: int, concurrency: int | None = None) -> InvokeBatch:
        self.ran.append([e["rollout_id"][1] for e in events])
        invs = [
            Invocation({"rollout_id": e["rollout_id"]}, BillingRecord(100, 100.0, 0.0, memory_mb, label="modelled"))
            for e in events
        ]
        return InvokeBatch(invs, 0.01, 0.12, "modelled", concurrency or len(events), notes=["inner note"])

    def close(self) -> None:
        self.closed = True


def _events(n: int, iteration: int = 0) -> list[dict[str, Any]]:
    return [{"actor_id": s, "rollout_id": [iteration, s, 0]} for s in range(n)]


def _one_kind(kind: str) -> FaultSpec:
    return FaultSpec(**{kind: 0.99})


def test_a_throttled_call_does_not_run_and_costs_nothing() -> None:
    inner = CountingBackend()
    batch = FaultInjectingBackend(inner, _one_kind("throttle")).invoke(_events(4), 1024)
    assert all(inv.result is None and classify_error(inv.billing.error) == "throttle" for inv in batch.invocations)
    assert all(inv.billing.billed_ms == 0 and inv.billing.duration_ms == 0 for inv in batch.invocations)
    assert inner.ran == []  # refused before it ran
    ledger = CostLedger(PriceTable.load())
    for inv in batch.invocations:
        ledger.add_fault("throttle", inv.billing.billed_ms, inv.billing.memory_mb, billed=False)
    assert ledger.total_usd == 0.0 and ledger.requests == 0
    assert ledger.fault_costs["throttle"]["invocations"] == 4


def test_a_failed_call_runs_and_is_billed_for_its_duration() -> None:
    inner = CountingBackend()
    batch = FaultInjectingBackend(inner, _one_kind("errors")).invoke(_events(3), 1024)
    assert inner.ran == [[0, 1, 2]]
    for inv in batch.invocations:
        assert inv.result is None and inv.billing.error == FUNCTION_ERROR
        assert inv.billing.billed_ms == 100 and inv.billing.label == "modelled"


def test_a_timed_out_call_is_billed_at_the_function_timeout() -> None:
    inner = CountingBackend()
    wrapped = FaultInjectingBackend(inner, _one_kind("timeouts"))
    batch = wrapped.invoke(_events(2), 2048)
    assert inner.ran == []
    for inv in batch.invocations:
        assert inv.result is None and classify_error(inv.billing.error) == "timeouts"
        assert inv.billing.billed_ms == 30_000 and inv.billing.memory_mb == 2048  # the inner backend's timeout
    assert batch.lambda_s == pytest.approx(30.0)  # a caller that does not hedge waits for it
    spec = FaultSpec(timeouts=0.99, timeout_s=5)
    assert FaultInjectingBackend(CountingBackend(), spec).invoke(_events(1), 1024).invocations[0].billing.billed_ms == 5000


def test_a_straggler_succeeds_slowly_and_is_billed_for_it() -> None:
    inner = CountingBackend()
    batch = FaultInjectingBackend(inner, FaultSpec(stragglers=0.99, slowdown=3)).invoke(_events(2), 1024)
    for inv in batch.invocations:
        assert inv.result is not None and inv.billing.error is None
        assert inv.billing.duration_ms == 300.0 and inv.billing.billed_ms == 300
    assert batch.lambda_s == pytest.approx(0.12 + 0.2)  # stretched to the slowest invocation
    assert batch.notes == ["inner note"]


def test_injected_counts_and_passthrough() -> None:
    spec = FaultSpec(errors=0.2, timeouts=0.2, stragglers=0.2, throttle=0.2, seed=3)
    inner = CountingBackend()
    wrapped = FaultInjectingBackend(inner, spec)
    events = [e for i in range(10) for e in _events(4, iteration=i)]
    batch = wrapped.invoke(events, 1024)
    expected = [spec.draw(tuple(e["rollout_id"])) for e in events]
    assert wrapped.injected == {kind: expected.count(kind) for kind in FAULT_KINDS}
    clean = [inv for inv, kind in zip(batch.invocations, expected) if kind is None]
    assert clean and all(inv.billing.error is None and inv.billing.billed_ms == 100 for inv in clean)
    wrapped.close()
    assert inner.closed


def test_events_without_a_rollout_id_pass_through_unfaulted() -> None:
    inner = CountingBackend()
    inner.invoke = lambda events, memory_mb, concurrency=None: InvokeBatch(  # type: ignore[method-assign]
        [Invocation({"ok": 1}, BillingRecord(100, 100.0, 0.0, memory_mb)) for _ in events], 0.0, 0.1, "modelled", 1
    )
    wrapped = FaultInjectingBackend(inner, FaultSpec(errors=0.99))
    batch = wrapped.invoke([{"actor_id": 0}, {"actor_id": 1}], 1024)
    assert [inv.result for inv in batch.invocations] == [{"ok": 1}, {"ok": 1}]
    assert sum(wrapped.injected.values()) == 0


def test_cli_rejects_a_bad_fault_spec_cleanly(tmp_path: Path) -> None:
    out = tmp_path / "bad.json"
    proc = subprocess.run(
        [sys.executable, "-m", "trainwise", "rl", "train", "--env", "CartPole-v1", "--target-reward", "475",
         "--inject-faults", "errors=2", "--json-out", str(out)],
        capture_output=True, text=True, timeout=120,
    )
    assert proc.returncode == 2
    assert "Traceback" not in proc.stderr
    assert "--inject-faults: errors must be a rate in [0, 1)" in proc.stderr
    assert not out.exists()


def test_workload_spec_validates_inject_faults() -> None:
    from optimizers.spec import parse_spec

    ok = parse_spec({"name": "x", "rl": {"target_reward": 475, "inject_faults": "errors=0.1,seed=2"}})
    assert ok.rl is not None and ok.rl.faults == FaultSpec(errors=0.1, seed=2)  # parsed where the section is read
    # the workload file's faults travel with the Seraph request that the flow's tasks run
    assert ok.rl.request().faults == FaultSpec(errors=0.1, seed=2)
    with pytest.raises(UserError, match="rl.inject_faults: unknown key 'bogus'"):
        parse_spec({"name": "x", "rl": {"target_reward": 475, "inject_faults": "bogus=1"}})


def test_make_backend_wraps_the_backend_in_the_injector_when_asked() -> None:
    from serverless.backends import make_backend

    plain = make_backend("local")
    assert not isinstance(plain, FaultInjectingBackend)
    for faults in ("errors=0.2,seed=4", FaultSpec(errors=0.2, seed=4)):
        wrapped = make_backend("local", faults=faults)
        assert isinstance(wrapped, FaultInjectingBackend) and wrapped.spec == FaultSpec(errors=0.2, seed=4)
        wrapped.close()
    with pytest.raises(UserError, match="unknown key 'bogus'"):
        make_backend("local", faults="bogus=1")
