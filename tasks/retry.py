"""Retry settings for tasks that touch external systems (function backends, disks, AWS).

Only failures that a second attempt can fix are retried: a throttled Lambda call, a
dropped connection, a Ray worker lost. Bad input (:class:`UserError`) and
programming errors (``ValueError``, ``TypeError``...) fail at once: retrying them
only wastes the user's time and money.
"""

from __future__ import annotations

from typing import Any

from prefect.tasks import exponential_backoff

from core.errors import UserError

_NOT_TRANSIENT = (UserError, ValueError, TypeError, KeyError, AttributeError, NotImplementedError, MemoryError)


def is_transient(exc: BaseException) -> bool:
    """Whether retrying could plausibly succeed."""
    return not isinstance(exc, _NOT_TRANSIENT)


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
EXTERNAL_RETRIES: dict[str, Any] = {
    "retries": 2,
    "retry_delay_seconds": exponential_backoff(backoff_factor=10),
    "retry_jitter_factor": 0.5,
    "retry_condition_fn": retry_if_transient,
}
