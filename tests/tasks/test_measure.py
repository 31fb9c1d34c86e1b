"""One measurement at a time per node, across flow runs (``tasks.measure``), on the Prefect test
server: two flow runs started at once, each with a measuring task that records when it measured.

The measuring task of run A, once inside, waits for run B to arrive at its own measuring task
and then gives B up to ``HOLD_S`` seconds to enter as well. With the node's limit B cannot enter
until A leaves, so the two intervals never overlap; without the limit (the control, the same
flows with the limit's context replaced by a no-op) B enters at once and the intervals overlap.
``HOLD_S`` only bounds how long A waits for something the limit forbids; no figure is compared
with a time.
"""

from __future__ import annotations

import contextlib
import contextvars
import threading
import time
import uuid
from typing import Any

import pytest
from prefect import flow, task

from tasks import measure

HOLD_S = 5.0
ARRIVE_TIMEOUT_S = 120.0

_arrived: dict[str, threading.Event] = {}
_entered: dict[str, threading.Event] = {}
_intervals: dict[str, tuple[float, float]] = {}


@task(name="test-measuring")
@measure.one_measurement_at_a_time
def measuring(who: str, other: str) -> None:
    _entered[who].set()
    start = time.monotonic()
    _arrived[other].wait(ARRIVE_TIMEOUT_S)
    _entered[other].wait(HOLD_S)  # returns at once if the other run is (or was) inside too
    _intervals[who] = (start, time.monotonic())


@flow(name="test-measuring-run")
def measuring_run(who: str, other: str) -> None:
    _arrived[who].set()  # this run is about to ask for the node's slot
    measuring(who, other)


def _two_concurrent_runs() -> dict[str, tuple[float, float]]:
    for store in (_arrived, _entered):
        store.clear()
        store.update({"a": threading.Event(), "b": threading.Event()})
    _intervals.clear()
    errors: list[BaseException] = []

    def run(who: str, other: str) -> None:
        try:
            measuring_run(who, other)
        except BaseException as exc:  # noqa: BLE001 - re-raised by the test below
            errors.append(exc)

    # each thread runs in a copy of this context: the test server's settings live in a context variable
    threads = [threading.Thread(target=contextvars.copy_context().run, args=(run, w, o)) for w, o in (("a", "b"), ("b", "a"))]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors, errors
    return dict(_intervals)


def _overlap(a: tuple[float, float], b: tuple[float, float]) -> bool:
    return a[0] < b[1] and b[0] < a[1]


@pytest.fixture
def fresh_node(monkeypatch: pytest.MonkeyPatch, prefect_harness: None) -> str:
    """A node name no other test uses, so its limit starts absent on the session's server."""
    node = f"test-{uuid.uuid4().hex[:8]}"
    monkeypatch.setenv("TRAINWISE_NODE", node)
    return node


def test_two_flow_runs_never_measure_at_once(fresh_node: str) -> None:
    intervals = _two_concurrent_runs()
    assert set(intervals) == {"a", "b"}
    assert not _overlap(intervals["a"], intervals["b"]), intervals


def test_without_the_limit_the_same_runs_overlap(fresh_node: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """The control: the test above can fail, since the same flows do measure at once unguarded."""

    def no_limit(*args: Any, **kwargs: Any) -> contextlib.AbstractContextManager[None]:
        return contextlib.nullcontext()

    monkeypatch.setattr(measure, "concurrency", no_limit)
    intervals = _two_concurrent_runs()
    assert _overlap(intervals["a"], intervals["b"]), intervals


def test_the_limit_is_created_with_one_slot_and_a_users_limit_is_kept(fresh_node: str) -> None:
    from prefect.client.orchestration import get_client

    name = measure.ensure_measure_limit()
    assert name == f"trainwise-measure-{fresh_node}"
    with get_client(sync_client=True) as client:
        assert client.read_global_concurrency_limit_by_name(name).limit == 1
        measure.set_measure_limit(2)
        measure.ensure_measure_limit()
        assert client.read_global_concurrency_limit_by_name(name).limit == 2


def test_every_measuring_task_takes_the_nodes_slot() -> None:
    from tasks import ingest, intunex, rl

    measuring_tasks = [ingest.profile_pipeline, ingest.tune_ingestion, ingest.measure_configurations,
                       rl.profile_rl_workload, rl.train_rl_on_functions, rl.train_rl_baseline]
    assert all(getattr(t.fn, "takes_measure_slot", False) for t in measuring_tasks)
    simulated = [intunex.cluster_profile, intunex.plan_cluster, ingest.locate_or_generate_data, rl.plan_rl_configuration]
    assert not any(getattr(t.fn, "takes_measure_slot", False) for t in simulated)


HANG_TIMEOUT_S = 2.0
_hang_started = threading.Event()


@task(name="test-hanging-measurement", timeout_seconds=HANG_TIMEOUT_S)
@measure.one_measurement_at_a_time
def hanging_measurement() -> None:
    _hang_started.set()
    while True:  # a measurement that never finishes (nothing it waits for ever comes)
        time.sleep(0.05)


@task(name="test-next-measurement", timeout_seconds=60)
@measure.one_measurement_at_a_time
def next_measurement() -> str:
    return "measured"


@flow(name="test-hung-measurement-run")
def hung_run() -> str:
    return hanging_measurement(return_state=True).name


@flow(name="test-next-measurement-run")
def next_run() -> str:
    return next_measurement()


def test_a_hung_measurement_times_out_and_frees_the_nodes_slot(fresh_node: str) -> None:
    """The hung task's run ends TimedOut; its slot is free at once (not when its lease lapses),
    so the next flow run measures."""
    from prefect.client.orchestration import get_client

    _hang_started.clear()
    assert hung_run() == "TimedOut"
    assert _hang_started.is_set()
    with get_client(sync_client=True) as client:
        limit = client.read_global_concurrency_limit_by_name(measure.limit_name())
    assert limit.limit == 1 and limit.active_slots == 0
    assert next_run() == "measured"


def test_every_measuring_and_training_task_has_a_timeout() -> None:
    from tasks import ingest, rl

    timed = [ingest.profile_pipeline, ingest.tune_ingestion, ingest.measure_configurations,
             rl.profile_rl_workload, rl.train_rl_on_functions, rl.train_rl_baseline]
    assert all(t.timeout_seconds is not None and t.timeout_seconds > 0 for t in timed)


def test_the_tuning_and_verifying_timeouts_grow_with_the_spec() -> None:
    from optimizers.spec import IngestSpec
    from tasks import timeouts

    assert timeouts.tune_timeout_s(3600) > 3600 and timeouts.tune_timeout_s(30) < timeouts.tune_timeout_s(3600)
    short, long = IngestSpec(), IngestSpec(verify_window_s=600, verify_repeats=20)
    assert timeouts.verify_timeout_s(3, long) > 3 * 600 * 20 > timeouts.verify_timeout_s(3, short)
