"""Fault-tolerant rollout collection: retries with backoff, hedged stragglers, rollout ids.

One iteration sends one event per slot (an actor's share of the batch). Every attempt at
a slot's rollout carries ``rollout_id = [iteration, slot, seq]`` (``seq`` counts the
attempts at that slot, 0 for the first), which the handler echoes back. The collector
keeps exactly one result per slot: the earliest to finish among the successful attempts
whose echoed id is the one it sent. A slot is never trained on twice and an iteration is
never trained on with a slot missing.

- **Retries.** A failed, throttled or timed-out attempt is retried after an exponential
  backoff with full jitter: ``U(0, 1) * min(cap, base * 2^(k-1))`` for the k-th retry of
  a slot, drawn from (iteration, slot, k) so a resumed run retries the same way. A slot
  gets at most ``max_attempts`` attempts (hedges included); if none succeeds the
  collector raises :class:`RolloutsFailed`, and the trainer stops with that reason.
- **Hedging.** On the modelled clock an attempt still running ``hedge_after`` times the
  median successful duration (the last ``history`` ones) gets a duplicate, started at that
  moment. The first to finish wins; the other one's cost is a fault on the ledger. A
  timed-out attempt is hedged the same way, so the trainer waits for the hedge, not the
  function timeout.
- **Clocks.** Attempts are sent in rounds (one backend call per round). On the modelled
  clock every attempt keeps its own start time (a retry starts when its predecessor failed
  plus its backoff; a hedge at the hedging moment), and the iteration's rollout time is the
  latest winning finish, plus the first round's overhead beyond its longest duration. On a
  measured backend the rounds follow one another, the backoff is slept, and the rollout
  time is their sum; stragglers are not hedged there (the batch call has already waited).
"""

from __future__ import annotations

import statistics
import time
from collections import deque
from dataclasses import dataclass, field
from typing import Any, TypedDict

import numpy as np

from core.errors import UserError
from serverless.backends.faults import classify_error
from serverless.invocation import BillingRecord, Invocation, InvokeBatch
from serverless.rollout_event import RolloutEvent, RolloutReply

FAULT_REPORT_KINDS = ("errors", "timeouts", "stragglers", "throttle", "stale")


@dataclass(frozen=True)
class RolloutRetryPolicy:
    """How hard the trainer tries to get every slot's rollout."""

    max_attempts: int = 8  # per slot and iteration, hedges included
    backoff_s: float = 0.1  # the first retry's backoff bound; doubles per retry
    backoff_cap_s: float = 10.0
    hedge: bool = True
    hedge_after: float = 2.0  # x the median successful duration
    history: int = 64  # successful durations the median is taken over

    def validate(self) -> None:
        if isinstance(self.max_attempts, bool) or not isinstance(self.max_attempts, int) or self.max_attempts < 1:
            raise UserError(f"retry max_attempts must be a whole number >= 1, got {self.max_attempts!r}")
        if not (self.backoff_s >= 0 and self.backoff_cap_s >= self.backoff_s):
            raise UserError(f"retry backoff must be >= 0 and its cap >= it, got {self.backoff_s} and {self.backoff_cap_s}")
        if not self.hedge_after > 1.0:
            raise UserError(f"retry hedge_after must be > 1 (a multiple of the median duration), got {self.hedge_after}")

    def backoff(self, iteration: int, slot: int, retry: int) -> float:
        """Full-jitter exponential backoff before the ``retry``-th retry (1, 2, ...) of a slot."""
        bound = min(self.backoff_cap_s, self.backoff_s * 2.0 ** (retry - 1))
        u = float(np.random.default_rng(np.random.SeedSequence([iteration, slot, retry, 7])).random())
        return u * bound


class RolloutsFailed(Exception):
    """A slot got no result in ``max_attempts`` attempts: faults that do not clear.

    ``wasted`` holds the (kind, bill) of every attempt of the abandoned iteration (paid
    for, or refused, all the same)."""

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.wasted: list[tuple[str, BillingRecord]] = []


class FaultTallyJson(TypedDict, total=False):
    """A :class:`FaultTally` as a checkpoint and a result hold it (an older checkpoint may lack keys)."""

    observed: dict[str, int]
    recovered: dict[str, int]
    retries: int
    hedges: int
    hedge_wins: int
    injected: dict[str, int]


@dataclass
class FaultTally:
    """Faults met and recovered from, by kind, and what the collector did about them."""

    observed: dict[str, int] = field(default_factory=lambda: {k: 0 for k in FAULT_REPORT_KINDS})
    recovered: dict[str, int] = field(default_factory=lambda: {k: 0 for k in FAULT_REPORT_KINDS})
    retries: int = 0
    hedges: int = 0
    hedge_wins: int = 0
    injected: dict[str, int] = field(default_factory=dict)  # by the fault-injection wrapper, if any

    def to_dict(self) -> FaultTallyJson:
        return {"observed": dict(self.observed), "recovered": dict(self.recovered), "retries": self.retries,
                "hedges": self.hedges, "hedge_wins": self.hedge_wins, "injected": dict(self.injected)}

    @classmethod
    def from_dict(cls, data: FaultTallyJson) -> "FaultTally":
        tally = cls()
        for name in ("observed", "recovered"):
            getattr(tally, name).update({str(k): int(v) for k, v in data.get(name, {}).items()})
        tally.retries, tally.hedges, tally.hedge_wins = (int(data.get(k, 0)) for k in ("retries", "hedges", "hedge_wins"))
        tally.injected = {str(k): int(v) for k, v in data.get("injected", {}).items()}
        return tally


@dataclass
class _Attempt:
    slot: int
    seq: int
    start_s: float  # on the modelled clock, from the iteration's first send
    hedge: bool = False
    backoff_s: float = 0.0  # waited before this attempt was sent
    invocation: Invocation | None = None
    fault: str | None = None
    hedged: bool = False  # a hedge has been sent for this attempt

    @property
    def ok(self) -> bool:
        return self.fault is None

    @property
    def duration_s(self) -> float:
        assert self.invocation is not None
        return self.invocation.billing.duration_ms / 1000.0

    @property
    def end_s(self) -> float:
        return self.start_s + self.duration_s


@dataclass
class Collected:
    """One iteration's rollouts: one result per slot, and every attempt's bill."""

    results: list[RolloutReply]  # slot order
    used_ids: list[tuple[int, int, int]]  # (iteration, slot, seq) of each result used
    used: list[BillingRecord]
    wasted: list[tuple[str, BillingRecord]]  # (kind, bill) of attempts whose result was not used
    batch: InvokeBatch  # every attempt, with the iteration's rollout clocks
    rounds: int


class RolloutCollector:
    """Sends an iteration's events and gets one result per slot back (see the module docstring)."""

    def __init__(self, backend: Any, policy: RolloutRetryPolicy, *, hedge: bool) -> None:
        self.backend = backend
        self.policy = policy
        self.hedge = hedge and policy.hedge
        self.tally = FaultTally()
        self.durations: deque[float] = deque(maxlen=policy.history)

    def collect(self, events: list[RolloutEvent], memory_mb: int, concurrency: int, iteration: int) -> Collected:
        attempts: dict[int, list[_Attempt]] = {slot: [] for slot in range(len(events))}
        pending = [_Attempt(slot, 0, 0.0) for slot in attempts]
        batches: list[InvokeBatch] = []
        slept = 0.0
        t0 = time.perf_counter()
        try:
            while pending:
                batch = self._send(events, pending, memory_mb, concurrency, iteration)
                batches.append(batch)
                for attempt in pending:
                    attempts[attempt.slot].append(attempt)
                modelled = batch.lambda_s_label == "modelled"
                bound = self._hedge_bound() if self.hedge and modelled else None
                pending = [nxt for tried in attempts.values() if (nxt := self._next(iteration, tried, bound)) is not None]
                if pending and not modelled:  # a measured clock waits for real
                    wait = max(a.backoff_s for a in pending)
                    time.sleep(wait)
                    slept += wait
        except RolloutsFailed as exc:
            exc.wasted = [(a.fault or "abandoned", a.invocation.billing) for t in attempts.values() for a in t if a.invocation]
            raise
        winners = {slot: self._winner(tried) for slot, tried in attempts.items()}
        self._learn_durations(winners.values())
        return self._collected(attempts, winners, batches, time.perf_counter() - t0, slept, iteration)

    # ------------------------------------------------------------------ one round
    def _send(
        self, events: list[RolloutEvent], pending: list[_Attempt], memory_mb: int, concurrency: int, iteration: int
    ) -> InvokeBatch:
        out = [events[a.slot] | {"rollout_id": [iteration, a.slot, a.seq]} for a in pending]
        batch = self.backend.invoke(out, memory_mb, concurrency=max(1, min(concurrency, len(out))))
        for attempt, inv in zip(pending, batch.invocations):
            attempt.invocation = inv
            attempt.fault = classify_error(inv.billing.error)
            if attempt.fault is None and inv.result is None:
                attempt.fault = "errors"
            echoed = None if inv.result is None else inv.result.get("rollout_id")
            if attempt.fault is None and echoed is not None and list(echoed) != [iteration, attempt.slot, attempt.seq]:
                attempt.fault = "stale"  # a result of another attempt: never used for this one
            if attempt.fault is not None:
                self.tally.observed[attempt.fault] += 1
        return batch

    def _hedge_bound(self) -> float | None:
        return self.policy.hedge_after * statistics.median(self.durations) if self.durations else None

    def _next(self, iteration: int, tried: list[_Attempt], bound: float | None) -> _Attempt | None:
        """The slot's next attempt, or None when it has its result."""
        seq = len(tried)
        successes = [a for a in tried if a.ok]
        if successes:
            best = min(successes, key=lambda a: a.end_s)
            if bound is None or best.hedged or best.duration_s <= bound or seq >= self.policy.max_attempts:
                return None
            return self._hedge_of(best, bound, seq, straggler=True)
        last = tried[-1]
        if seq >= self.policy.max_attempts:
            errors = "; ".join(sorted({str(a.invocation.billing.error) for a in tried if a.invocation}))
            raise RolloutsFailed(
                f"slot {last.slot} of iteration {iteration} failed {seq} attempts in a row "
                f"(the retry bound): {errors or 'stale results'}"
            )
        if last.fault == "timeouts" and bound is not None and not last.hedged and last.duration_s > bound:
            return self._hedge_of(last, bound, seq, straggler=False)
        retry = sum(1 for a in tried if not a.ok)
        self.tally.retries += 1
        backoff = self.policy.backoff(iteration, last.slot, retry)
        return _Attempt(last.slot, seq, last.end_s + backoff, backoff_s=backoff)

    def _hedge_of(self, attempt: _Attempt, bound: float, seq: int, *, straggler: bool) -> _Attempt:
        attempt.hedged = True
        self.tally.hedges += 1
        if straggler:
            self.tally.observed["stragglers"] += 1
        return _Attempt(attempt.slot, seq, attempt.start_s + bound, hedge=True)

    # ------------------------------------------------------------------ the outcome
    def _winner(self, tried: list[_Attempt]) -> _Attempt:
        winner = min((a for a in tried if a.ok), key=lambda a: a.end_s)
        for attempt in tried:
            if attempt.fault is not None:
                self.tally.recovered[attempt.fault] += 1
        self.tally.recovered["stragglers"] += sum(1 for a in tried if a.hedged and a.ok)  # each hedged straggler
        if winner.hedge:
            self.tally.hedge_wins += 1
        return winner

    def _learn_durations(self, winners: Any) -> None:
        for w in winners:
            if not w.hedge and w.seq == 0:
                self.durations.append(w.duration_s)

    def _collected(
        self,
        attempts: dict[int, list[_Attempt]],
        winners: dict[int, _Attempt],
        batches: list[InvokeBatch],
        wall_s: float,
        slept_s: float,
        iteration: int,
    ) -> Collected:
        first = batches[0]
        label = first.lambda_s_label
        if len(batches) == 1:
            lambda_s = first.lambda_s
        elif label == "modelled":
            longest_first = max(inv.billing.duration_ms for inv in first.invocations) / 1000.0
            overhead = max(0.0, first.lambda_s - longest_first)
            lambda_s = overhead + max(w.end_s for w in winners.values())
        else:
            lambda_s = sum(b.lambda_s for b in batches) + slept_s
        wasted = [
            (a.fault or "hedge_loser", a.invocation.billing)
            for tried in attempts.values()
            for a in tried
            if a is not winners[a.slot] and a.invocation is not None
        ]
        every = [a.invocation for tried in attempts.values() for a in tried if a.invocation is not None]
        wall_s = first.wall_s if len(batches) == 1 else wall_s
        merged = InvokeBatch(every, wall_s, lambda_s, label, first.concurrency, list(first.notes))  # retry rounds: same notes
        retried = [bill for b in batches for bill in getattr(b, "retried_billing", [])]
        wasted += [(classify_error(bill.error) or "errors", bill) for bill in retried]
        slots = sorted(winners)
        return Collected(
            results=[winners[s].invocation.result for s in slots],  # type: ignore[union-attr]
            used_ids=[(iteration, s, winners[s].seq) for s in slots],
            used=[winners[s].invocation.billing for s in slots],  # type: ignore[union-attr]
            wasted=wasted,
            batch=merged,
            rounds=len(batches),
        )
