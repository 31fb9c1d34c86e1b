"""Fault-tolerant rollouts: retries with backoff, hedged stragglers, rollout ids, and the
trainer under injected faults (no rollout lost or used twice, the faults' cost on the ledger)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest

from serverless import handler as handler_module
from serverless.backends.faults import FUNCTION_ERROR, THROTTLE_ERROR, FaultInjectingBackend, FaultSpec
from serverless.invocation import BillingRecord, Invocation, InvokeBatch
from serverless.ledger import CostLedger
from serverless.ppo import PPOConfig
from serverless.pricing import PriceTable
from serverless.rollouts import RolloutRetryPolicy, RolloutCollector, RolloutsFailed
from serverless.run_state import RunState
from serverless.trainer import TrainSpec, bill_rollouts, train
from serverless.run_shape import RunShape


class Scripted:
    """Outcomes by (slot, seq): "ok" (100 ms), "error", "throttle", "timeout" (30 s),
    ("slow", ms), "stale" (echoes another attempt's id). Results echo the rollout id."""

    name = "scripted"

    def __init__(self, plan: dict[tuple[int, int], Any], label: str = "modelled") -> None:
        self.plan = plan
        self.label = label
        self.sent: list[list[int]] = []

    def invoke(self, events: list[dict[str, Any]], memory_mb: int, concurrency: int | None = None) -> InvokeBatch:
        invs = []
        for e in events:
            it, slot, seq = e["rollout_id"]
            self.sent.append(e["rollout_id"])
            what = self.plan.get((slot, seq), "ok")
            ms = what[1] if isinstance(what, tuple) else 100.0
            result = {"rollout_id": [it, slot, seq], "slot": slot, "seq": seq}
            if what == "stale":
                result["rollout_id"] = [it - 1, slot, seq]
            if what == "error":
                invs.append(Invocation(None, BillingRecord(100, 100.0, 0, memory_mb, error=FUNCTION_ERROR, label=self.label)))
            elif what == "throttle":
                invs.append(Invocation(None, BillingRecord(0, 0.0, 0, memory_mb, error=THROTTLE_ERROR, label=self.label)))
            elif what == "timeout":
                bill = BillingRecord(30_000, 30_000.0, 0, memory_mb, error="Task timed out after 30.00 seconds", label=self.label)
                invs.append(Invocation(None, bill))
            else:
                invs.append(Invocation(result, BillingRecord(int(ms), float(ms), 0, memory_mb, label=self.label)))
        longest = max(inv.billing.duration_ms for inv in invs) / 1000.0
        return InvokeBatch(invs, 0.001, longest + 0.02, self.label, concurrency or len(events))

    def close(self) -> None:
        pass


def _collect(backend: Scripted, slots: int = 4, policy: RolloutRetryPolicy | None = None, hedge: bool = True,
             history: list[float] | None = None) -> tuple[Any, RolloutCollector]:
    collector = RolloutCollector(backend, policy or RolloutRetryPolicy(), hedge=hedge)
    collector.durations.extend(history or [])
    events = [{"actor_id": s} for s in range(slots)]
    return collector.collect(events, 1024, slots, iteration=5), collector


def test_failed_and_throttled_slots_are_retried_until_every_slot_has_one_result() -> None:
    backend = Scripted({(0, 0): "error", (0, 1): "throttle", (2, 0): "throttle"})
    got, collector = _collect(backend)
    assert [(r["slot"], r["seq"]) for r in got.results] == [(0, 2), (1, 0), (2, 1), (3, 0)]
    assert got.used_ids == [(5, 0, 2), (5, 1, 0), (5, 2, 1), (5, 3, 0)]
    assert got.rounds == 3
    tally = collector.tally
    assert tally.observed["errors"] == 1 and tally.observed["throttle"] == 2
    assert tally.recovered == tally.observed and tally.retries == 3
    # the wasted attempts, by kind; billed onto the ledger as faults (the throttles for nothing)
    assert sorted(kind for kind, _ in got.wasted) == ["errors", "throttle", "throttle"]
    ledger = CostLedger(PriceTable.load())
    bill_rollouts(ledger, got, [])
    assert ledger.requests == 4 + 1  # four used, one failed; throttled calls are not requests
    assert ledger.fault_costs["throttle"] == {"invocations": 2, "gb_seconds": 0.0, "usd": 0.0}
    assert ledger.fault_costs["errors"]["usd"] > 0


def test_retries_back_off_exponentially_on_the_modelled_clock() -> None:
    policy = RolloutRetryPolicy(backoff_s=1.0, backoff_cap_s=100.0)
    got, _ = _collect(Scripted({(0, 0): "error", (0, 1): "error"}), slots=1, policy=policy)
    first, second = policy.backoff(5, 0, 1), policy.backoff(5, 0, 2)
    assert 0 <= first <= 1.0 and 0 <= second <= 2.0
    # three 100 ms attempts one after another with the two backoffs between, plus the batch overhead
    assert got.batch.lambda_s == pytest.approx(0.02 + 0.3 + first + second)


def test_a_measured_backend_sleeps_the_backoff_and_adds_the_rounds() -> None:
    policy = RolloutRetryPolicy(backoff_s=0.01, backoff_cap_s=0.01)
    got, _ = _collect(Scripted({(1, 0): "error"}, label="measured"), slots=2, policy=policy)
    assert got.rounds == 2
    assert got.batch.lambda_s >= 0.12 + 0.12  # two sequential rounds (+ the slept backoff)
    assert got.batch.lambda_s_label == "measured"


def test_a_straggler_is_hedged_and_the_first_to_finish_wins() -> None:
    # slot 1 takes 1 s where the median is 100 ms: a hedge starts at 200 ms and ends at 300 ms
    got, collector = _collect(Scripted({(1, 0): ("slow", 1000.0)}), history=[0.1] * 8)
    assert [r["seq"] for r in got.results] == [0, 1, 0, 0]
    assert collector.tally.hedges == 1 and collector.tally.hedge_wins == 1
    assert [kind for kind, _ in got.wasted] == ["hedge_loser"]  # the straggler, paid for, not used
    assert got.wasted[0][1].billed_ms == 1000
    assert got.batch.lambda_s == pytest.approx(0.02 + 0.3)  # the hedge's finish, not the straggler's


def test_a_straggling_hedge_is_hedged_again_and_both_count_as_recovered() -> None:
    # 1 s; its hedge (from 200 ms) takes 500 ms, ahead but slow itself; its hedge (from 400 ms)
    # takes 100 ms: done at 500 ms
    got, collector = _collect(Scripted({(1, 0): ("slow", 1000.0), (1, 1): ("slow", 500.0)}), history=[0.1] * 8)
    assert [r["seq"] for r in got.results] == [0, 2, 0, 0]
    assert collector.tally.observed["stragglers"] == collector.tally.recovered["stragglers"] == 2
    assert got.batch.lambda_s == pytest.approx(0.02 + 0.5)


def test_a_hedge_that_finishes_later_loses() -> None:
    # straggler 300 ms; hedge starts at 200 ms and takes 250 ms (ends at 450): the straggler wins
    got, collector = _collect(Scripted({(1, 0): ("slow", 300.0), (1, 1): ("slow", 250.0)}), history=[0.1] * 8)
    assert [r["seq"] for r in got.results] == [0, 0, 0, 0]
    assert collector.tally.hedges == 1 and collector.tally.hedge_wins == 0
    assert got.wasted[0][0] == "hedge_loser" and got.wasted[0][1].billed_ms == 250


def test_a_timeout_is_hedged_instead_of_waited_for() -> None:
    got, collector = _collect(Scripted({(2, 0): "timeout"}), history=[0.1] * 8)
    assert [r["seq"] for r in got.results] == [0, 0, 1, 0]
    assert got.batch.lambda_s == pytest.approx(0.02 + 0.3)  # 200 ms bound + 100 ms hedge, not 30 s
    assert [kind for kind, _ in got.wasted] == ["timeouts"] and got.wasted[0][1].billed_ms == 30_000
    assert collector.tally.recovered["timeouts"] == 1


def test_without_hedging_a_straggler_is_waited_for() -> None:
    got, collector = _collect(Scripted({(1, 0): ("slow", 1000.0)}), hedge=False, history=[0.1] * 8)
    assert got.rounds == 1 and collector.tally.hedges == 0
    assert got.batch.lambda_s == pytest.approx(1.02)


def test_a_stale_result_is_refused_and_the_slot_retried() -> None:
    got, collector = _collect(Scripted({(3, 0): "stale"}))
    assert got.used_ids[3] == (5, 3, 1)
    assert collector.tally.observed["stale"] == 1 and [k for k, _ in got.wasted] == ["stale"]


def test_faults_that_never_clear_stop_with_the_retry_bound() -> None:
    plan = {(1, seq): "error" for seq in range(10)}
    with pytest.raises(RolloutsFailed, match="slot 1 of iteration 5 failed 3 attempts in a row") as info:
        _collect(Scripted(plan), policy=RolloutRetryPolicy(max_attempts=3, backoff_s=0.0))
    assert len(info.value.wasted) == 3 + 3  # three failures of slot 1, the other slots' results


def test_run_state_counts_lost_and_duplicate_rollouts() -> None:
    state = RunState(run=RunShape(), reach_window=20)
    state.count_rollouts(4, [(0, 0, 0), (0, 1, 2), (0, 2, 0), (0, 3, 1)])
    assert (state.rollouts_used, state.lost_rollouts, state.duplicate_rollouts) == (4, 0, 0)
    state.count_rollouts(4, [(1, 0, 0), (1, 0, 1), (1, 2, 0)])  # slot 0 twice, 1 and 3 missing
    assert (state.rollouts_used, state.lost_rollouts, state.duplicate_rollouts) == (7, 2, 1)


# --------------------------------------------------------------------------- the trainer under faults

class InProcess:
    """The real handler in this process, 'modelled' durations from its timings."""

    name = "inprocess"

    def invoke(self, events: list[dict[str, Any]], memory_mb: int, concurrency: int | None = None) -> InvokeBatch:
        invs = []
        for event in events:
            result = handler_module.handler(event, None)
            ms = 50.0 + result["env_steps"] * 0.1  # steady durations: a straggler stands out
            invs.append(Invocation(result, BillingRecord(int(np.ceil(ms)), ms, 0.0, memory_mb, label="modelled")))
        return InvokeBatch(invs, 0.01, max(i.billing.duration_ms for i in invs) / 1000 + 0.02, "modelled", concurrency or len(events))

    def close(self) -> None:
        pass


def _spec(tmp_path: Path, **kw: Any) -> TrainSpec:
    base: dict[str, Any] = dict(
        env_id="CartPole-v1",
        target_reward=1e9,
        max_steps=2048,
        run=RunShape(actors=4, memory_mb=1769, batch=256),
        ppo=PPOConfig(epochs=1, minibatch_size=128),
        seed=4,
        checkpoint_every=0,
        checkpoint_dir=tmp_path / "ckpt",
    )
    base.update(kw)
    return TrainSpec(**base)


@pytest.fixture(autouse=True)
def _cold() -> None:
    handler_module.reset_warm_state()


def test_training_under_heavy_faults_loses_and_duplicates_nothing(tmp_path: Path) -> None:
    faults = FaultSpec(errors=0.15, timeouts=0.1, stragglers=0.15, throttle=0.15, seed=2, timeout_s=10)
    result = train(_spec(tmp_path, faults=faults), backend=InProcess(), progress=False)
    d = result.to_dict()
    assert d["env_steps"] == 2048 and d["stop_reason"] == "max_steps"
    assert d["lost_rollouts"] == 0 and d["duplicate_rollouts"] == 0
    f = d["faults"]
    assert f["spec"] == faults.describe() and f["rollouts_used"] == 8 * 4
    assert sum(f["injected"].values()) > 0
    for kind in ("errors", "timeouts", "throttle"):
        assert f["observed"][kind] == f["injected"][kind] == f["recovered"][kind]
    assert f["hedges"] >= f["observed"]["timeouts"]  # every timeout was hedged (there is a history after iteration 0)
    # a failed hedge needs no retry when the attempt it hedged succeeds
    assert 0 < f["retries"] <= f["observed"]["errors"] + f["observed"]["throttle"]
    # the ledger: the faults' cost is its own component, inside the function and request lines
    faults_line = d["ledger"]["faults"]
    assert faults_line["usd"] > 0 and faults_line["by_kind"]["throttle"]["usd"] == 0.0
    assert faults_line["by_kind"]["timeouts"]["gb_seconds"] == pytest.approx(f["injected"]["timeouts"] * 10.0 * 1769 / 1024)
    attempts = sum(r.rollout["invocations"] for r in result.iterations)
    assert result.ledger.requests == attempts - f["injected"]["throttle"]


def test_faults_at_every_attempt_stop_the_run_with_a_reason(tmp_path: Path) -> None:
    spec = _spec(tmp_path, faults=FaultSpec(errors=0.99), retry=RolloutRetryPolicy(max_attempts=3, backoff_s=0.0), checkpoint_every=1)
    result = train(spec, backend=InProcess(), progress=False)
    assert result.stop_reason.startswith("faults: slot ") and "failed 3 attempts in a row" in result.stop_reason
    assert not result.reached and result.env_steps == 0 and result.iterations == []
    assert any("resume once the faults clear" in n for n in result.notes)
    assert result.ledger.fault_costs["errors"]["invocations"] >= 3  # the failed attempts are paid for


@pytest.mark.parametrize("steps_per_env", [64, 0], ids=["env-slots", "one-env-per-function"])
def test_faults_do_not_change_what_is_learned(tmp_path: Path, steps_per_env: int) -> None:
    """Every attempt at a slot carries the slot's seed and episode in progress, so a retry or
    a hedge produces exactly the experience the first attempt would have: the same learning
    as a fault-free run (even where a failed attempt had stepped a warm env). One env per
    function is the layout whose slot k is actor k's env, so the same holds there."""
    ppo = PPOConfig(epochs=1, minibatch_size=128, steps_per_env=steps_per_env)
    free = train(_spec(tmp_path / "free", ppo=ppo), backend=InProcess(), progress=False)
    handler_module.reset_warm_state()
    faults = FaultSpec(errors=0.15, timeouts=0.1, stragglers=0.15, throttle=0.15, seed=3, timeout_s=5)
    faulty = train(_spec(tmp_path / "faulty", ppo=ppo, faults=faults), backend=InProcess(), progress=False)
    assert sum(faulty.faults["injected"].values()) > 10 and faulty.faults["injected"]["errors"] > 0
    assert [(c["env_steps"], c["mean_return"], c["episodes"]) for c in faulty.curve] == [
        (c["env_steps"], c["mean_return"], c["episodes"]) for c in free.curve
    ]


class Crash(Exception):
    pass


class CrashAt:
    """A controller that crashes the run after iteration ``n`` (before its checkpoint)."""

    def __init__(self, n: int) -> None:
        self.n = n

    def after_iteration(self, record: Any) -> None:
        if record.iteration == self.n:
            raise Crash(f"crash after iteration {self.n}")


def test_a_resumed_faulty_run_meets_the_same_faults(tmp_path: Path) -> None:
    """Fault draws and backoffs are functions of the rollout id, so a resumed run sees the
    faults an uninterrupted one does (with env slots, the same experience too)."""
    faults = FaultSpec(errors=0.2, throttle=0.2, seed=9)
    ppo = PPOConfig(epochs=1, minibatch_size=128, steps_per_env=32)
    whole = train(_spec(tmp_path / "a", faults=faults, ppo=ppo, max_steps=1024), backend=InProcess(), progress=False)
    handler_module.reset_warm_state()
    with pytest.raises(Crash):
        train(_spec(tmp_path / "b", faults=faults, ppo=ppo, max_steps=1024, checkpoint_every=1), backend=InProcess(),
              controller=CrashAt(2), progress=False)
    handler_module.reset_warm_state()
    resumed = train(_spec(tmp_path / "b", faults=faults, ppo=ppo, max_steps=1024, resume=True), backend=InProcess(), progress=False)
    assert any("resumed from" in n and "at iteration 2," in n for n in resumed.notes)
    assert resumed.faults["injected"] == whole.faults["injected"]
    assert resumed.faults["observed"] == whole.faults["observed"]
    assert [c["mean_return"] for c in resumed.curve] == [c["mean_return"] for c in whole.curve]
