"""The function-backend contract check (in the spirit of Gymnasium's ``check_env``).

:func:`check_backend` drives a backend through :class:`serverless.invocation.FunctionBackend`
with a small batch of real rollout events, one of them malformed, and raises
:class:`BackendContractError` naming the first broken promise:

* ``invoke`` returns one :class:`~serverless.invocation.Invocation` per event, in order;
* a good event comes back with the handler's result (its ``actor_id``, its trajectories) and
  a well-formed billing record: whole billed milliseconds of at least one, not below the
  duration, at the requested memory, labelled as the backend's entry declares;
* the malformed event's error is reported in its own billing record, not raised, and the
  good events around it are still returned;
* the batch's clock is labelled as declared and its times are non-negative;
* an empty batch is no invocation, and a memory size outside Lambda's range is a ``UserError``.

The tests run it over every registered backend; run it on your own before registering it.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np

from core.errors import UserError
from serverless.backends import BACKENDS, BackendEntry
from serverless.invocation import BillingRecord, FunctionBackend, InvokeBatch
from serverless.network import NetworkSpec
from serverless.policy import PolicySpec, encode_b64
from serverless.rollout_event import RolloutEvent

#: The malformed probe event's actor id (a stand-in for Lambda's data plane can answer it with an error).
BAD_ACTOR_ID = 999
CHECK_MEMORY_MB = 1769


class BackendContractError(AssertionError):
    """A backend broke the ``FunctionBackend`` contract."""


@dataclass(frozen=True)
class BackendCheck:
    """What the check saw: useful in a test's assertion message or a plug-in's own test."""

    backend: str
    invocations: int
    failed: int
    billing_labels: tuple[str, ...]
    clock_label: str


def probe_events(good: int = 2, num_steps: int = 16, env_id: str = "CartPole-v1") -> list[RolloutEvent]:
    """``good`` small CartPole rollout events with random policy weights, then one malformed
    event (``num_steps`` 0, which the handler rejects) with actor id :data:`BAD_ACTOR_ID`."""
    spec = PolicySpec(obs_dim=4, action_kind="discrete", act_dim=2, network=NetworkSpec((8,)))
    rng = np.random.default_rng(0)
    arrays: dict[str, np.ndarray] = {}
    for head, out in (("actor", 2), ("critic", 1)):
        sizes = (4, *spec.network.hidden, out)
        for i in range(len(sizes) - 1):
            arrays[f"{head}.{i}.w"] = (rng.standard_normal((sizes[i], sizes[i + 1])) * 0.1).astype(np.float32)
            arrays[f"{head}.{i}.b"] = np.zeros(sizes[i + 1], dtype=np.float32)
    base = {"env_id": env_id, "policy_spec": spec.to_dict(), "weights_npz_b64": encode_b64(arrays)}
    events = [{**base, "num_steps": num_steps, "seed": 100 + i, "actor_id": i} for i in range(good)]
    return [*events, {**base, "num_steps": 0, "seed": 7, "actor_id": BAD_ACTOR_ID}]


def _require(ok: bool, backend: str, message: str) -> None:
    if not ok:
        raise BackendContractError(f"backend {backend!r}: {message}")


def _check_billing(name: str, i: int, b: Any, memory_mb: int, entry: BackendEntry) -> None:
    _require(isinstance(b, BillingRecord), name, f"invocation {i}: billing is a {type(b).__name__}, not a BillingRecord")
    _require(isinstance(b.billed_ms, int) and b.billed_ms >= 0, name, f"invocation {i}: billed_ms {b.billed_ms!r} is not whole ms >= 0")
    _require(b.duration_ms >= 0 and b.init_ms >= 0, name, f"invocation {i}: negative duration or init time")
    _require(b.memory_mb == memory_mb, name, f"invocation {i}: billed at {b.memory_mb} MB, asked {memory_mb} MB")
    _require(b.label in entry.billing, name, f"invocation {i}: billing label {b.label!r}, its entry declares {entry.billing}")


def _check_good(name: str, i: int, event: RolloutEvent, inv: Any) -> None:
    b = inv.billing
    _require(b.error is None, name, f"invocation {i} (a good event) failed: {b.error}")
    _require(isinstance(inv.result, dict), name, f"invocation {i}: no result dict")
    _require(inv.result.get("actor_id") == event["actor_id"], name, f"invocation {i}: result is out of order")
    _require("trajectories_npz_b64" in inv.result or "trajectories_s3" in inv.result, name,
             f"invocation {i}: the result has no trajectories")
    _require(b.billed_ms >= 1 and b.billed_ms >= math.floor(b.duration_ms), name,
             f"invocation {i}: billed {b.billed_ms} ms for {b.duration_ms:.2f} ms (Lambda rounds up to 1 ms)")


def _check_failed(name: str, i: int, inv: Any) -> None:
    _require(inv.result is None, name, f"invocation {i} (a malformed event) returned a result")
    _require(isinstance(inv.billing.error, str) and inv.billing.error.strip() != "", name,
             f"invocation {i} (a malformed event): its error is not reported in its billing record")


def _check_batch(name: str, batch: Any, events: list[RolloutEvent], memory_mb: int, concurrency: int,
                 entry: BackendEntry) -> None:
    _require(isinstance(batch, InvokeBatch), name, f"invoke returned a {type(batch).__name__}, not an InvokeBatch")
    _require(len(batch.invocations) == len(events), name,
             f"{len(batch.invocations)} invocations for {len(events)} events")
    _require(batch.wall_s >= 0 and batch.lambda_s >= 0, name, "negative batch time")
    _require(batch.lambda_s_label == entry.clock, name,
             f"batch clock labelled {batch.lambda_s_label!r}, its entry declares {entry.clock!r}")
    _require(1 <= batch.concurrency <= concurrency, name, f"concurrency {batch.concurrency}, asked at most {concurrency}")
    for i, (event, inv) in enumerate(zip(events, batch.invocations)):
        _check_billing(name, i, inv.billing, memory_mb, entry)
        if event["actor_id"] == BAD_ACTOR_ID:
            _check_failed(name, i, inv)
        else:
            _check_good(name, i, event, inv)


def check_backend(backend: FunctionBackend, entry: BackendEntry | None = None, *,
                  events: list[RolloutEvent] | None = None, memory_mb: int = CHECK_MEMORY_MB,
                  concurrency: int = 2) -> BackendCheck:
    """Exercise ``backend`` (see the module doc); ``entry`` defaults to its registered entry."""
    name = getattr(backend, "name", None)
    _require(isinstance(name, str) and bool(name), repr(backend), "has no name")
    _require(callable(getattr(backend, "invoke", None)) and callable(getattr(backend, "close", None)), name,
             "lacks invoke() or close()")
    entry = entry or BACKENDS.get(name)
    events = probe_events() if events is None else events
    batch = backend.invoke(events, memory_mb, concurrency=concurrency)
    _check_batch(name, batch, events, memory_mb, concurrency, entry)
    empty = backend.invoke([], memory_mb)
    _require(len(empty.invocations) == 0, name, "an empty batch returned invocations")
    try:
        backend.invoke(events[:1], 64)
    except UserError:
        pass
    else:
        raise BackendContractError(f"backend {name!r}: 64 MB (below Lambda's 128 MB) was accepted, not a UserError")
    return BackendCheck(name, len(batch.invocations), sum(1 for inv in batch.invocations if inv.billing.error),
                        tuple(sorted({inv.billing.label for inv in batch.invocations})), batch.lambda_s_label)
