"""One measurement at a time per node, across flow runs.

InTune measures throughput and Seraph measures step times on the machine they run on; two
flow runs measuring at once on one node (the nightly re-tune and a run started from the UI)
share its cores and corrupt each other's figures. Every measuring task therefore runs its
body inside :func:`one_measurement_at_a_time`, which holds a slot of the Prefect global
concurrency limit ``trainwise-measure-<node>`` (``<node>`` is this machine's host name, or
``TRAINWISE_NODE`` when set). The limit lives on the Prefect server, so it holds across flow
runs, deployments and workers, not only inside one run.

The limit has one slot unless a user sets another (``trainwise setup --measure-slots``). It is
created by ``trainwise setup`` and ``trainwise serve`` and, when missing, by the first measuring
task that needs it, so a fresh server never runs a measurement unguarded. A user's existing
limit of the same name is left as it is.

The measuring tasks: ``profile-pipeline``, ``tune-pipeline`` and ``measure-configurations``
(InTune), ``profile-rl-workload``, ``train-rl-on-functions`` and ``train-rl-baseline``
(Seraph). InTuneX's tasks run the cluster model and measure nothing, so they take no slot.
"""

from __future__ import annotations

import functools
import os
import re
import socket
from collections.abc import Callable
from typing import Any, TypeVar

from prefect.client.orchestration import get_client
from prefect.concurrency.sync import concurrency
from prefect.exceptions import ObjectAlreadyExists, ObjectNotFound

F = TypeVar("F", bound=Callable[..., Any])

LIMIT_PREFIX = "trainwise-measure-"
#: How long a measuring task holds its slot between lease renewals (Prefect renews it while
#: the task runs; a crashed task's slot is freed when its lease runs out).
LEASE_S = 300.0


def node_name() -> str:
    """This node's name in the limit: ``TRAINWISE_NODE`` or the host name (letters, digits, ``.-_``)."""
    raw = os.environ.get("TRAINWISE_NODE") or socket.gethostname() or "localhost"
    return re.sub(r"[^A-Za-z0-9._-]", "-", raw)


def limit_name() -> str:
    return LIMIT_PREFIX + node_name()


def ensure_measure_limit() -> str:
    """Create the node's limit with one slot unless one of that name exists; return its name."""
    from prefect.client.schemas.actions import GlobalConcurrencyLimitCreate

    name = limit_name()
    with get_client(sync_client=True) as client:
        try:
            client.read_global_concurrency_limit_by_name(name)
            return name  # created by setup, serve, another task, or the user: keep it as it is
        except ObjectNotFound:
            pass
        try:  # reading first keeps the usual case off the server's error log (a failed INSERT)
            client.create_global_concurrency_limit(GlobalConcurrencyLimitCreate(name=name, limit=1))
        except ObjectAlreadyExists:
            pass  # another run created it between the read and the create
    return name


def set_measure_limit(slots: int = 1) -> str:
    """Create the node's limit or set its slots to ``slots`` (``trainwise setup``); return its name."""
    name = limit_name()
    with get_client(sync_client=True) as client:
        client.upsert_global_concurrency_limit_by_name(name, slots)
    return name


def one_measurement_at_a_time(fn: F) -> F:
    """``fn`` run while holding a slot of this node's measurement limit (waits for one)."""

    @functools.wraps(fn)
    def measured(*args: Any, **kwargs: Any) -> Any:
        name = ensure_measure_limit()
        with concurrency(name, occupy=1, lease_duration=LEASE_S, strict=True):
            return fn(*args, **kwargs)

    measured.takes_measure_slot = True  # type: ignore[attr-defined]
    return measured  # type: ignore[return-value]
