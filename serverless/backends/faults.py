"""Fault injection: a wrapper that makes any function backend fail like AWS Lambda does.

``FaultInjectingBackend(inner, FaultSpec.parse("errors=0.1,timeouts=0.05,stragglers=0.1,
throttle=0.1,seed=1"))`` behaves like ``inner`` except that each invocation, independently,
is one of:

- **throttled** (rate ``throttle``): refused before it runs, as Lambda refuses a call over
  the concurrency limit with HTTP 429 ``TooManyRequestsException``. Nothing runs and
  nothing is billed (no duration, no request charge).
- **a function error** (rate ``errors``): the function runs, then fails. Its result is
  lost; its duration is billed, as Lambda bills a failed invocation.
- **timed out** (rate ``timeouts``): the function hangs until the function timeout and is
  stopped there (``Task timed out after T seconds``). It is billed for the whole timeout.
  ``timeout_s`` sets T; by default it is the wrapped backend's own function timeout
  (``inner.timeout_s``, the local emulator's 900 s unless configured otherwise).
- **a straggler** (rate ``stragglers``): the function runs and succeeds but takes
  ``slowdown`` times as long (default 4), on the modelled clock, and is billed for it.

The draw for one invocation is a pure function of ``seed`` and the invocation's rollout id
(``event["rollout_id"]``: iteration, slot, sequence number, set by the trainer), so a run
resumed from a checkpoint meets the same faults as an uninterrupted one. Events without a
rollout id (a measurement probe, which has no retry path) pass through unfaulted.

Injected records carry the label ``modelled`` (the injected durations are a model, whatever
the wrapped backend measured), and ``injected`` counts what was injected, by kind.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, fields, replace
from typing import Any

import numpy as np

from core.errors import UserError
from serverless.invocation import LAMBDA_MAX_TIMEOUT_S, BillingRecord, Invocation, InvokeBatch
from serverless.pricing import billed_ms
from serverless.rollout_event import RolloutEvent

# The kinds of fault, in the order one uniform draw is split among them.
FAULT_KINDS = ("throttle", "errors", "timeouts", "stragglers")
THROTTLE_ERROR = "TooManyRequestsException (HTTP 429): Rate exceeded [injected]"
FUNCTION_ERROR = "InjectedFunctionError: the function failed after running [injected]"


def timeout_error(timeout_s: float) -> str:
    return f"Task timed out after {timeout_s:.2f} seconds [injected]"


def classify_error(error: str | None) -> str | None:
    """A failed invocation's fault kind from its error text: throttle, timeouts or errors.

    "throttle" is an attempt refused before it ran, billed nothing: a 429, and the Lambda
    backend's ``rejected: ...`` (a 429, a 5xx of the service or a lost connection)."""
    if error is None:
        return None
    text = error.lower()
    if text.startswith("rejected:"):
        return "throttle"
    if "toomanyrequests" in text or "throttl" in text or "429" in text or "rate exceeded" in text:
        return "throttle"
    if "timed out" in text or "timeout" in text:
        return "timeouts"
    return "errors"


_RATE_KEYS = ("errors", "timeouts", "stragglers", "throttle")
_ALLOWED = "errors, timeouts, stragglers, throttle (rates in [0, 1)), seed (whole number >= 0), " \
    "slowdown (> 1), timeout_s (1-900)"


def _number(key: str, raw: str) -> float:
    try:
        value = float(raw)
    except ValueError:
        raise UserError(f"fault spec: {key}={raw!r} is not a number; allowed keys: {_ALLOWED}") from None
    if not math.isfinite(value):
        raise UserError(f"fault spec: {key} must be finite, got {raw!r}; allowed keys: {_ALLOWED}")
    return value


@dataclass(frozen=True)
class FaultSpec:
    """Rates of each fault (independent per invocation), the seed, and the fault shapes."""

    errors: float = 0.0
    timeouts: float = 0.0
    stragglers: float = 0.0
    throttle: float = 0.0
    seed: int = 0
    slowdown: float = 4.0  # a straggler takes this many times as long
    timeout_s: float | None = None  # the function timeout a timed-out call is billed at

    def __post_init__(self) -> None:
        for key in _RATE_KEYS:
            value = getattr(self, key)
            if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0.0 <= value < 1.0:
                raise UserError(f"fault spec: {key} must be a rate in [0, 1), got {value!r}; allowed keys: {_ALLOWED}")
        if sum(getattr(self, k) for k in _RATE_KEYS) >= 1.0:
            raise UserError(
                "fault spec: errors + timeouts + stragglers + throttle must be below 1 (each invocation draws at "
                f"most one fault), got {sum(getattr(self, k) for k in _RATE_KEYS):g}"
            )
        if isinstance(self.seed, bool) or not isinstance(self.seed, int) or self.seed < 0:
            raise UserError(f"fault spec: seed must be a whole number >= 0, got {self.seed!r}")
        if not (isinstance(self.slowdown, (int, float)) and math.isfinite(self.slowdown) and self.slowdown > 1.0):
            raise UserError(f"fault spec: slowdown must be a number > 1, got {self.slowdown!r}")
        if self.timeout_s is not None and not 1.0 <= self.timeout_s <= LAMBDA_MAX_TIMEOUT_S:
            raise UserError(f"fault spec: timeout_s must be from 1 to {LAMBDA_MAX_TIMEOUT_S} seconds, got {self.timeout_s!r}")

    @classmethod
    def parse(cls, text: str) -> "FaultSpec":
        """``"errors=0.1,timeouts=0.05,stragglers=0.1,throttle=0.1,seed=1"`` (any subset, any order)."""
        if not isinstance(text, str) or not text.strip():
            raise UserError(f"fault spec: give key=value pairs separated by commas, e.g. errors=0.1,seed=1; keys: {_ALLOWED}")
        known = {f.name for f in fields(cls)}
        values: dict[str, float | int] = {}
        for part in text.split(","):
            key, sep, raw = (s.strip() for s in part.partition("="))
            if not sep or not key or not raw:
                raise UserError(f"fault spec: {part.strip()!r} is not key=value; allowed keys: {_ALLOWED}")
            if key not in known:
                raise UserError(f"fault spec: unknown key {key!r}; allowed keys: {_ALLOWED}")
            if key in values:
                raise UserError(f"fault spec: {key} is given twice")
            number = _number(key, raw)
            if key == "seed":
                if not number.is_integer():
                    raise UserError(f"fault spec: seed must be a whole number >= 0, got {raw!r}")
                values[key] = int(number)
            else:
                values[key] = number
        return cls(**values)

    @property
    def active(self) -> bool:
        return any(getattr(self, k) > 0 for k in _RATE_KEYS)

    def describe(self) -> str:
        """The spec as a string :meth:`parse` reads back."""
        parts = [f"{k}={getattr(self, k):g}" for k in _RATE_KEYS] + [f"seed={self.seed}", f"slowdown={self.slowdown:g}"]
        if self.timeout_s is not None:
            parts.append(f"timeout_s={self.timeout_s:g}")
        return ",".join(parts)

    def draw(self, key: tuple[int, ...]) -> str | None:
        """The fault (a key of :data:`FAULT_KINDS`) for the invocation ``key``, or None."""
        u = float(np.random.default_rng(np.random.SeedSequence([self.seed, *key])).random())
        edge = 0.0
        for kind in FAULT_KINDS:
            edge += getattr(self, kind)
            if u < edge:
                return kind
        return None


class FaultInjectingBackend:
    """Wraps a :class:`~serverless.invocation.FunctionBackend`; see the module docstring."""

    def __init__(self, inner: Any, spec: FaultSpec) -> None:
        self.inner = inner
        self.spec = spec
        self.name = getattr(inner, "name", "backend")
        self.injected: dict[str, int] = {kind: 0 for kind in FAULT_KINDS}

    @property
    def function_timeout_s(self) -> float:
        if self.spec.timeout_s is not None:
            return float(self.spec.timeout_s)
        inner_timeout = getattr(self.inner, "timeout_s", None)
        return float(inner_timeout) if inner_timeout else float(LAMBDA_MAX_TIMEOUT_S)

    def _draw(self, event: RolloutEvent) -> str | None:
        rid = event.get("rollout_id")
        return None if rid is None else self.spec.draw(tuple(int(x) for x in rid))

    def invoke(self, events: list[RolloutEvent], memory_mb: int, concurrency: int | None = None) -> InvokeBatch:
        kinds = [self._draw(e) for e in events]
        for kind in kinds:
            if kind is not None:
                self.injected[kind] += 1
        run = [i for i, kind in enumerate(kinds) if kind not in ("throttle", "timeouts")]
        inner_batch = None
        if run:
            inner_concurrency = None if concurrency is None else max(1, min(int(concurrency), len(run)))
            inner_batch = self.inner.invoke([events[i] for i in run], memory_mb, concurrency=inner_concurrency)
        ran = dict(zip(run, inner_batch.invocations)) if inner_batch is not None else {}
        invocations = [self._outcome(kind, ran.get(i), memory_mb) for i, kind in enumerate(kinds)]
        return self._batch(invocations, inner_batch, concurrency or len(events))

    def _outcome(self, kind: str | None, inv: Invocation | None, memory_mb: int) -> Invocation:
        if kind == "throttle":
            return Invocation(None, BillingRecord(0, 0.0, 0.0, memory_mb, error=THROTTLE_ERROR, label="modelled"))
        if kind == "timeouts":
            ms = self.function_timeout_s * 1000.0
            bill = BillingRecord(billed_ms(ms), ms, 0.0, memory_mb, error=timeout_error(self.function_timeout_s), label="modelled")
            return Invocation(None, bill)
        assert inv is not None
        if kind == "errors" and inv.billing.error is None:
            return Invocation(None, replace(inv.billing, error=FUNCTION_ERROR, label="modelled"))
        if kind == "stragglers" and inv.billing.error is None:
            ms = inv.billing.duration_ms * self.spec.slowdown
            return Invocation(inv.result, replace(inv.billing, duration_ms=ms, billed_ms=billed_ms(ms), label="modelled"))
        return inv

    @staticmethod
    def _batch(invocations: list[Invocation], inner: InvokeBatch | None, concurrency: int) -> InvokeBatch:
        """The batch's Lambda time: the inner batch's, stretched to its slowest invocation now."""
        longest = max((inv.billing.duration_ms for inv in invocations), default=0.0) / 1000.0
        if inner is None:
            return InvokeBatch(invocations, 0.0, longest, "modelled", concurrency)
        inner_longest = max((inv.billing.duration_ms for inv in inner.invocations), default=0.0) / 1000.0
        lambda_s = inner.lambda_s + max(0.0, longest - inner_longest)
        batch = InvokeBatch(invocations, inner.wall_s, lambda_s, inner.lambda_s_label, concurrency, list(inner.notes))
        if hasattr(inner, "retried_billing"):  # the Lambda backend's own billed retries
            batch.retried_billing = list(inner.retried_billing)  # type: ignore[attr-defined]
        return batch

    def close(self) -> None:
        self.inner.close()
