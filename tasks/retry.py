"""Retry settings for tasks that touch external systems (function backends, disks, AWS).

Retrying is an allow-list: only a failure that a second attempt can fix is retried,

- **throttling**: an AWS ``ClientError`` whose code says the caller was throttled
  (``ThrottlingException``, ``TooManyRequestsException``, ``SlowDown``...) or whose HTTP
  status is 429;
- **timeout**: ``TimeoutError`` (which ``socket.timeout``, ``concurrent.futures.TimeoutError``
  and ``asyncio.TimeoutError`` are), botocore's read and connect timeouts, urllib3's
  timeouts, an AWS ``RequestTimeout``;
- **connection**: ``ConnectionError`` (reset, refused, aborted, broken pipe), botocore's
  endpoint and closed-connection errors, urllib3's protocol and new-connection errors;
- **server error**: a ``ClientError`` with an HTTP status of 500 or more, or a service-side
  code (``ServiceException``, ``InternalFailure``...);
- **worker lost**: a process pool whose worker died (``BrokenProcessPool``), or Ray's
  ``WorkerCrashedError``, ``RayActorError`` and ``NodeDiedError``.

The function backends absorb a dead or timed-out function worker themselves (a cold
worker replaces it and the rollout slot is tried again), so no project exception means
"worker lost" at a task's level; ``serverless.rollouts.RolloutsFailed`` is what is left
when those in-run retries did not clear the fault, and it is not retried again. A Lambda
invoke's throttle, 5xx or lost connection never reaches this layer either: the backend
returns it as that attempt's result and the trainer's rollout collector is the one retry
policy of the call (``serverless.backends.lambda_backend``), so these task retries never
wrap a Lambda call's own.

Everything else fails at once: bad input (:class:`UserError`), programming errors
(``RuntimeError``, ``AssertionError``, ``IndexError``, ``ValueError``...), a full disk.
Retrying them only wastes the user's time and money, a whole training run at a time.

A wrapped failure counts by what it wraps: the classifier walks ``__cause__`` and (unless
suppressed by ``raise ... from None``) ``__context__``. A :class:`UserError` anywhere on
that chain, before a transient link, is a verdict on the input and stops the walk.

botocore, urllib3 and Ray are never imported here: an exception of their classes can only
exist once its module is loaded, so the classifier looks the classes up in ``sys.modules``.
"""

from __future__ import annotations

import sys
from collections.abc import Iterator
from concurrent.futures.process import BrokenProcessPool
from typing import Any, Callable, TypedDict

from prefect.tasks import exponential_backoff

from core.errors import UserError

#: AWS error codes of a throttled request (S3, DynamoDB, EC2, Lambda, ...).
THROTTLING_CODES = frozenset({
    "Throttling", "ThrottlingException", "ThrottledException", "RequestThrottled", "RequestThrottledException",
    "TooManyRequestsException", "RequestLimitExceeded", "ProvisionedThroughputExceeded",
    "ProvisionedThroughputExceededException", "BandwidthLimitExceeded", "SlowDown", "PriorRequestNotComplete",
    "EC2ThrottledException",
})
#: AWS error codes of a failure on the service's side.
SERVER_ERROR_CODES = frozenset({
    "ServiceException", "ServiceUnavailable", "ServiceUnavailableException", "InternalFailure", "InternalError",
    "InternalServerError", "InternalServiceError",
})
#: AWS error codes of a request that timed out.
TIMEOUT_CODES = frozenset({"RequestTimeout", "RequestTimeoutException"})

# Exception classes by kind: (module, class names) of optional libraries, looked up in sys.modules.
_BUILTIN_KINDS: tuple[tuple[str, tuple[type[BaseException], ...]], ...] = (
    ("timeout", (TimeoutError,)),
    ("connection", (ConnectionError,)),
    ("worker lost", (BrokenProcessPool,)),
)
_OPTIONAL_KINDS: tuple[tuple[str, str, tuple[str, ...]], ...] = (
    ("timeout", "botocore.exceptions", ("ReadTimeoutError", "ConnectTimeoutError")),
    ("timeout", "urllib3.exceptions", ("TimeoutError",)),
    ("connection", "botocore.exceptions", ("EndpointConnectionError", "ConnectionClosedError", "ConnectionError")),
    ("connection", "urllib3.exceptions", ("ProtocolError", "NewConnectionError")),
    ("worker lost", "ray.exceptions", ("WorkerCrashedError", "RayActorError", "NodeDiedError")),
)


def _loaded_classes(module_name: str, names: tuple[str, ...]) -> tuple[type[BaseException], ...]:
    """The named exception classes of a module already imported (none if it is not)."""
    module = sys.modules.get(module_name)
    return tuple(getattr(module, name) for name in names if hasattr(module, name))


def _client_error_kind(exc: BaseException) -> str | None:
    """The kind of a botocore ``ClientError`` by its error code and HTTP status (None if not transient)."""
    client_error = _loaded_classes("botocore.exceptions", ("ClientError",))
    if not client_error or not isinstance(exc, client_error):
        return None
    response = getattr(exc, "response", None) or {}
    code = response.get("Error", {}).get("Code", "")
    status = response.get("ResponseMetadata", {}).get("HTTPStatusCode") or 0
    if code in THROTTLING_CODES or status == 429:
        return "throttling"
    if code in TIMEOUT_CODES:
        return "timeout"
    if code in SERVER_ERROR_CODES or status >= 500:
        return "server error"
    return None


def _kind_of(exc: BaseException) -> str | None:
    """The transient kind of one exception, not looking at what it wraps."""
    for kind, classes in _BUILTIN_KINDS:
        if isinstance(exc, classes):
            return kind
    for kind, module_name, names in _OPTIONAL_KINDS:
        classes = _loaded_classes(module_name, names)
        if classes and isinstance(exc, classes):
            return kind
    return _client_error_kind(exc)


def _chain(exc: BaseException) -> Iterator[BaseException]:
    """The exception, then what it was raised from or while handling, outermost first."""
    seen: set[int] = set()
    link: BaseException | None = exc
    while link is not None and id(link) not in seen:
        seen.add(id(link))
        yield link
        link = link.__cause__ if link.__cause__ is not None else (
            None if link.__suppress_context__ else link.__context__)


def transient_kind(exc: BaseException) -> str | None:
    """Why a retry could succeed ("throttling", "timeout", "connection", "server error",
    "worker lost"), or None when it cannot."""
    for link in _chain(exc):
        if isinstance(link, UserError):
            return None
        kind = _kind_of(link)
        if kind is not None:
            return kind
    return None


def is_transient(exc: BaseException) -> bool:
    """Whether retrying could plausibly succeed."""
    return transient_kind(exc) is not None


def retry_if_transient(task: Any, task_run: Any, state: Any) -> bool:
    """Prefect ``retry_condition_fn``: retry only transient failures."""
    exc = state.data if isinstance(state.data, BaseException) else None
    if exc is None:
        try:
            state.result(raise_on_failure=True)
        except BaseException as raised:  # noqa: BLE001 - we classify, not handle
            exc = raised
    return exc is None or is_transient(exc)


# Two retries, 10 s then 20 s (jittered): long enough for a throttle to clear, short
# enough that a real outage surfaces within a minute.
class RetryOptions(TypedDict):
    """Prefect's retry keywords of a task (``@task(**EXTERNAL_RETRIES)``)."""

    retries: int
    retry_delay_seconds: Callable[[int], list[float]]  # prefect.tasks.exponential_backoff
    retry_jitter_factor: float
    retry_condition_fn: Callable[..., bool]


EXTERNAL_RETRIES: RetryOptions = {
    "retries": 2,
    "retry_delay_seconds": exponential_backoff(backoff_factor=10),
    "retry_jitter_factor": 0.5,
    "retry_condition_fn": retry_if_transient,
}
