"""Which failures a task with ``EXTERNAL_RETRIES`` retries: an allow-list of transient kinds
(throttling, timeouts, connection errors, 5xx, a lost worker), looked for along the
exception's cause and context; everything else fails at once, under Prefect too."""

from __future__ import annotations

import concurrent.futures
import errno
import socket
import subprocess
import sys
import textwrap
from concurrent.futures.process import BrokenProcessPool
from pathlib import Path
from typing import Any

import pytest
import ray.exceptions
import urllib3.exceptions
from botocore import exceptions as boto

from core.errors import UserError
from serverless.rollouts import RolloutsFailed
from tasks.retry import EXTERNAL_RETRIES, is_transient, retry_if_transient, transient_kind

ENDPOINT = "https://lambda.eu-west-1.amazonaws.com"


def _client_error(code: str, status: int) -> boto.ClientError:
    return boto.ClientError({"Error": {"Code": code, "Message": "from the service"},
                             "ResponseMetadata": {"HTTPStatusCode": status}}, "Invoke")


def _wrapped(inner: BaseException, *, suppress: bool = False, as_cause: bool = True) -> RuntimeError:
    """A RuntimeError raised from ``inner`` (as its cause or its context, or with the context suppressed)."""
    try:
        try:
            raise inner
        except BaseException as caught:
            if suppress:
                raise RuntimeError("wrapped") from None
            if as_cause:
                raise RuntimeError("wrapped") from caught
            raise RuntimeError("wrapped while handling it")
    except RuntimeError as outer:
        return outer


TRANSIENT = [
    ("throttling", _client_error("ThrottlingException", 400)),
    ("throttling", _client_error("Throttling", 400)),
    ("throttling", _client_error("TooManyRequestsException", 429)),
    ("throttling", _client_error("RequestLimitExceeded", 503)),
    ("throttling", _client_error("ProvisionedThroughputExceededException", 400)),
    ("throttling", _client_error("SlowDown", 503)),
    ("throttling", _client_error("SomethingNew", 429)),
    ("timeout", TimeoutError("timed out")),
    ("timeout", socket.timeout("timed out")),
    ("timeout", concurrent.futures.TimeoutError()),
    ("timeout", boto.ReadTimeoutError(endpoint_url=ENDPOINT)),
    ("timeout", boto.ConnectTimeoutError(endpoint_url=ENDPOINT)),
    ("timeout", urllib3.exceptions.ReadTimeoutError(None, ENDPOINT, "read timed out")),
    ("timeout", _client_error("RequestTimeout", 400)),
    ("connection", ConnectionResetError("reset by peer")),
    ("connection", BrokenPipeError()),
    ("connection", boto.EndpointConnectionError(endpoint_url=ENDPOINT)),
    ("connection", boto.ConnectionClosedError(endpoint_url=ENDPOINT)),
    ("connection", urllib3.exceptions.ProtocolError("Connection aborted.")),
    ("server error", _client_error("ServiceException", 500)),
    ("server error", _client_error("InternalFailure", 500)),
    ("server error", _client_error("BadGateway", 502)),
    ("server error", _client_error("ServiceUnavailable", 503)),
    ("worker lost", BrokenProcessPool("a child process terminated abruptly")),
    ("worker lost", ray.exceptions.WorkerCrashedError()),
    ("worker lost", ray.exceptions.RayActorError()),
    ("worker lost", ray.exceptions.NodeDiedError("node died")),
    ("timeout", _wrapped(TimeoutError("timed out"))),
    ("connection", _wrapped(ConnectionResetError("reset"), as_cause=False)),
    ("throttling", _wrapped(_wrapped(_client_error("SlowDown", 503)))),
]

DETERMINISTIC = [
    RuntimeError("a bug"),
    AssertionError("an invariant broke"),
    IndexError("list index out of range"),
    ValueError("a bug"),
    KeyError("missing"),
    TypeError("a bug"),
    UserError("bad memory size"),
    OSError(errno.ENOSPC, "No space left on device"),
    RolloutsFailed("slot 0 of iteration 3 failed 8 attempts in a row (the retry bound)"),
    _client_error("AccessDeniedException", 403),
    _client_error("ResourceNotFoundException", 404),
    _client_error("InvalidParameterValueException", 400),
    _wrapped(TimeoutError("timed out"), suppress=True),  # `raise ... from None` hides the context
]


@pytest.mark.parametrize(("kind", "exc"), TRANSIENT, ids=lambda v: v if isinstance(v, str) else type(v).__name__)
def test_each_transient_kind_is_retried(kind: str, exc: BaseException) -> None:
    assert transient_kind(exc) == kind
    assert is_transient(exc)


@pytest.mark.parametrize("exc", DETERMINISTIC, ids=lambda e: type(e).__name__)
def test_everything_else_fails_at_once(exc: BaseException) -> None:
    assert transient_kind(exc) is None
    assert not is_transient(exc)


def test_a_user_error_on_the_chain_is_a_verdict_on_the_input() -> None:
    assert not is_transient(_wrapped(UserError("ingestion.data.path is not a folder")))
    try:
        raise UserError("no such function") from TimeoutError("timed out")
    except UserError as exc:
        assert not is_transient(exc)


def test_a_cycle_of_contexts_ends() -> None:
    first, second = RuntimeError("first"), RuntimeError("second")
    first.__context__, second.__context__ = second, first
    assert not is_transient(first)


class _State:
    def __init__(self, exc: BaseException) -> None:
        self.data = exc


def test_the_prefect_condition_reads_the_failed_state() -> None:
    assert retry_if_transient(None, None, _State(_client_error("ThrottlingException", 400))) is True
    assert retry_if_transient(None, None, _State(UserError("no"))) is False
    assert retry_if_transient(None, None, _State(RuntimeError("a bug"))) is False


def test_the_classifier_needs_neither_botocore_nor_ray_nor_urllib3(tmp_path: Path) -> None:
    """Imported where those libraries cannot be, it still classifies the built-in kinds."""
    script = textwrap.dedent("""
        import sys
        for name in ("botocore", "boto3", "ray", "urllib3"):
            sys.modules[name] = None  # an import of it now fails
        from tasks.retry import transient_kind
        assert transient_kind(TimeoutError()) == "timeout", transient_kind(TimeoutError())
        assert transient_kind(ConnectionResetError()) == "connection"
        assert transient_kind(RuntimeError()) is None
        print("classified")
    """)
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, check=False,
                          cwd=Path(__file__).resolve().parents[2])
    assert done.returncode == 0 and done.stdout.strip() == "classified", done.stderr


@pytest.mark.usefixtures("prefect_workspace")
@pytest.mark.parametrize(("fault", "runs"), [
    (RuntimeError("a bug"), 1),
    (AssertionError("an invariant broke"), 1),
    (IndexError("list index out of range"), 1),
    (_client_error("ThrottlingException", 400), 2),
    (_wrapped(TimeoutError("timed out")), 2),
], ids=["RuntimeError", "AssertionError", "IndexError", "throttled", "wrapped-timeout"])
def test_a_task_with_external_retries_runs_again_only_after_a_transient_failure(fault: BaseException,
                                                                                 runs: int) -> None:
    """A task failing once: a deterministic failure fails the task at its first run, a
    transient one is run again (and then succeeds). The retry delay is 0 here."""
    from prefect import flow, task

    calls: list[int] = []

    @task(**EXTERNAL_RETRIES)
    def touch_the_outside() -> str:
        calls.append(1)
        if len(calls) == 1:
            raise fault
        return "done"

    @flow
    def one_task() -> Any:
        return touch_the_outside.with_options(retry_delay_seconds=0, retry_jitter_factor=None)()

    state = one_task(return_state=True)
    assert len(calls) == runs
    if runs == 1:
        assert state.is_failed()
        with pytest.raises(type(fault)):
            state.result()
    else:
        assert state.is_completed(), state.message
        assert state.result() == "done"
