"""The local Lambda emulator: real worker processes, warm/cold, labels, memory checks."""

from __future__ import annotations

import base64
import signal

import pytest

from serverless.backends import make_backend
from serverless.backends import local
from serverless.backends.local import LocalBackend
from serverless.envs import inspect_env
from serverless.policy import encode_weights, export_numpy
from serverless.torch_policy import ActorCritic
from core.errors import UserError


def _events(n: int, steps: int = 50) -> list[dict]:
    spec = inspect_env("CartPole-v1")
    weights = base64.b64encode(encode_weights(export_numpy(ActorCritic(spec)))).decode()
    return [
        {"env_id": "CartPole-v1", "num_steps": steps, "seed": i, "policy_spec": spec.to_dict(), "actor_id": i, "weights_npz_b64": weights}
        for i in range(n)
    ]


@pytest.fixture(scope="module")
def backend():
    b = LocalBackend(max_workers=2)
    yield b
    b.close()


def test_invoke_returns_results_and_modelled_bills(backend: LocalBackend) -> None:
    batch = backend.invoke(_events(3), memory_mb=1769, concurrency=3)
    assert len(batch.invocations) == 3
    assert batch.lambda_s_label == "modelled" and batch.concurrency == 3
    for i, inv in enumerate(batch.invocations):
        assert inv.result is not None and inv.result["actor_id"] == i and inv.result["env_steps"] == 50
        bill = inv.billing
        assert bill.error is None and bill.label == "modelled" and bill.memory_mb == 1769
        assert bill.billed_ms >= bill.duration_ms and bill.billed_ms - bill.duration_ms < 1
        assert bill.cold_start and bill.init_ms > 0  # first use of each actor: cold
        assert "measured_wall_ms" in inv.result["emulator"]
    again = backend.invoke(_events(3), memory_mb=1769, concurrency=3)
    assert all(not inv.billing.cold_start and inv.billing.init_ms == 0 for inv in again.invocations)


def test_concurrency_above_cores_is_reported() -> None:
    b = LocalBackend(max_workers=1)
    b.cores = 1  # pretend a one-core machine
    try:
        batch = b.invoke(_events(2, steps=10), memory_mb=1769, concurrency=2)
        assert any("exceeds" in note for note in batch.notes)
    finally:
        b.close()


def test_new_memory_size_means_cold_instances_and_throttled_runs_complete(backend: LocalBackend) -> None:
    backend.invoke(_events(2), memory_mb=1769, concurrency=2)
    batch = backend.invoke(_events(2), memory_mb=512, concurrency=2)
    assert all(inv.billing.cold_start for inv in batch.invocations)
    assert all(inv.result is not None and inv.billing.memory_mb == 512 for inv in batch.invocations)


def _signals_sent(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """Every signal the backend sends its workers (the throttle's SIGSTOP/SIGCONT), in order."""
    sent: list[int] = []
    send = local._Worker._signal

    def spy(worker: local._Worker, sig: int) -> None:
        sent.append(sig)
        send(worker, sig)

    monkeypatch.setattr(local._Worker, "_signal", spy)
    return sent


def test_below_one_vcpu_the_throttle_stops_and_resumes_the_worker(backend: LocalBackend,
                                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    """At 128 MB a function gets 128/1769 of a vCPU (1.4 ms of CPU per 20 ms period); a
    300-step rollout needs far more CPU than one period's quota, so the worker is stopped."""
    sent = _signals_sent(monkeypatch)
    batch = backend.invoke(_events(2, steps=300), memory_mb=128, concurrency=2)
    assert all(inv.result is not None for inv in batch.invocations)
    assert all(inv.result["emulator"]["throttled_s"] > 0 for inv in batch.invocations)
    assert sent.count(signal.SIGSTOP) > 0 and sent.count(signal.SIGSTOP) == sent.count(signal.SIGCONT)


@pytest.mark.parametrize(("memory_mb", "throttle"), [(1769, True), (128, False)])
def test_at_one_vcpu_or_with_the_throttle_off_the_worker_is_never_stopped(memory_mb: int, throttle: bool,
                                                                          monkeypatch: pytest.MonkeyPatch) -> None:
    sent = _signals_sent(monkeypatch)
    b = LocalBackend(max_workers=1, throttle=throttle)
    try:
        batch = b.invoke(_events(1, steps=300), memory_mb=memory_mb, concurrency=1)
    finally:
        b.close()
    assert batch.invocations[0].result["emulator"]["throttled_s"] == 0.0
    assert sent == []


def test_handler_errors_are_reported_per_invocation(backend: LocalBackend) -> None:
    events = _events(2)
    events[1]["env_id"] = "NoSuchEnv-v0"
    batch = backend.invoke(events, memory_mb=1769, concurrency=2)
    assert batch.invocations[0].billing.error is None
    assert batch.invocations[1].result is None and "NoSuchEnv" in batch.invocations[1].billing.error


@pytest.mark.parametrize("memory", [0, 127, 10_241])
def test_memory_outside_lambda_range(backend: LocalBackend, memory: int) -> None:
    with pytest.raises(UserError, match="128-10240"):
        backend.invoke(_events(1), memory_mb=memory)


def test_make_backend_names() -> None:
    with pytest.raises(UserError, match="local, ray, lambda"):
        make_backend("nope")
    b = make_backend("local", max_workers=1)
    assert isinstance(b, LocalBackend)
    b.close()


def test_timeout_kills_the_instance_and_the_next_call_is_cold() -> None:
    # 200,000 CartPole steps take seconds of CPU; a 50 ms timeout cannot be met
    b = LocalBackend(max_workers=1, timeout_s=0.05)
    try:
        batch = b.invoke(_events(1, steps=200_000), memory_mb=1769, concurrency=1)
        inv = batch.invocations[0]
        assert inv.result is None and "timed out" in inv.billing.error
        assert inv.billing.billed_ms == 50  # billed for the whole timeout
        # the next instance is cold whatever the machine's load: give it all the time it needs
        b.timeout_s = 600.0
        after = b.invoke(_events(1, steps=10), memory_mb=1769, concurrency=1).invocations[0]
        assert after.billing.error is None and after.billing.cold_start
    finally:
        b.close()


def test_a_worker_killed_mid_invocation_fails_that_call_only(monkeypatch: pytest.MonkeyPatch) -> None:
    """A function instance that dies for another reason than a timeout (SIGKILL right after it
    received its event): that invocation reports the death, the next one gets a new, cold
    instance. The doomed event asks for many steps, so the instance cannot have answered it
    before the kill lands, however the machine's load schedules the two processes."""
    import os
    import signal

    import serverless.backends.local as local

    real_write = local.write_frame
    killed: list[int] = []

    def write_then_kill(stream, message):  # type: ignore[no-untyped-def]
        real_write(stream, message)
        if message.get("op") == "invoke" and not killed:
            pid = b._workers[0].proc.pid
            os.kill(pid, signal.SIGKILL)
            killed.append(pid)

    b = LocalBackend(max_workers=1, timeout_s=None)
    monkeypatch.setattr(local, "write_frame", write_then_kill)
    try:
        dead = b.invoke(_events(1, steps=1_000_000), memory_mb=1769, concurrency=1).invocations[0]
        assert killed and dead.result is None and "died" in dead.billing.error
        after = b.invoke(_events(1, steps=10), memory_mb=1769, concurrency=1).invocations[0]
        assert after.billing.error is None and after.billing.cold_start
        assert b._workers[0].proc.pid != killed[0]
    finally:
        b.close()
