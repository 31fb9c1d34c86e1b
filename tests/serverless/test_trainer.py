"""The trainer: a short run, the controller hook, grad-noise probes, resume, bad input."""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from serverless import handler as handler_module
from serverless.invocation import BillingRecord, Invocation, InvokeBatch
from serverless.policy import PolicySpec
from serverless.ppo import PPOConfig, PPOLearner, compute_gae
from serverless.trainer import IterationRecord, TrainSpec, train
from serverless.run_shape import RunShape
from core.errors import UserError


class InProcessBackend:
    """Calls the real handler in this process; records what it was asked."""

    name = "inprocess"

    def __init__(self) -> None:
        self.calls: list[tuple[int, int, int]] = []  # (events, memory, concurrency)
        self.closed = False

    def invoke(self, events: list[dict[str, Any]], memory_mb: int, concurrency: int | None = None) -> InvokeBatch:
        self.calls.append((len(events), memory_mb, concurrency or len(events)))
        t0 = time.perf_counter()
        invs = []
        for event in events:
            result = handler_module.handler(event, None)
            ms = result["timings"]["total_ms"]
            invs.append(Invocation(result, BillingRecord(max(1, int(np.ceil(ms))), ms, 0.0, memory_mb, label="measured")))
        wall = time.perf_counter() - t0
        return InvokeBatch(invs, wall, wall, "measured", concurrency or len(events))

    def close(self) -> None:
        self.closed = True


def _spec(tmp_path: Path, **kw: Any) -> TrainSpec:
    base = dict(
        env_id="CartPole-v1",
        target_reward=1e9,
        max_steps=512,
        run=RunShape(actors=2, memory_mb=1769, batch=256),
        ppo=PPOConfig(epochs=2, minibatch_size=64),
        seed=3,
        checkpoint_every=1,
        checkpoint_dir=tmp_path / "ckpt",
    )
    base.update(kw)
    return TrainSpec(**base)


@pytest.fixture(autouse=True)
def _cold() -> None:
    handler_module.reset_warm_state()


def test_short_run_reports_every_key(tmp_path: Path) -> None:
    backend = InProcessBackend()
    result = train(_spec(tmp_path), backend=backend, progress=False)
    d = result.to_dict()
    for key in ("reached", "env_steps", "wall_s", "lambda_time_s", "curve", "config", "cost_usd", "ledger", "iterations"):
        assert key in d
    assert d["reached"] is False and d["stop_reason"] == "max_steps" and d["env_steps"] == 512
    assert backend.calls == [(2, 1769, 2), (2, 1769, 2)]
    assert not backend.closed  # a caller's backend is the caller's to close
    assert len(d["curve"]) == 2 and d["curve"][-1]["env_steps"] == 512
    assert d["ledger"]["lines"][1]["quantity"] == 4  # four requests
    assert d["cost_usd"] == pytest.approx(d["ledger"]["total_usd"]) and d["cost_usd"] > 0


def test_reached_stops_early(tmp_path: Path) -> None:
    # a target every episode beats: reached once 20 episodes have completed
    result = train(_spec(tmp_path, target_reward=1.0, max_steps=10_000), backend=InProcessBackend(), progress=False)
    assert result.reached and result.stop_reason == "reached"
    assert result.episodes >= 20 and result.env_steps < 10_000


def test_max_steps_not_a_multiple_of_batch_shrinks_the_last_batch(tmp_path: Path) -> None:
    result = train(_spec(tmp_path, max_steps=300), backend=InProcessBackend(), progress=False)
    assert result.env_steps == 300


class ScriptedController:
    def __init__(self) -> None:
        self.records: list[IterationRecord] = []

    def after_iteration(self, record: IterationRecord) -> RunShape | None:
        self.records.append(record)
        return RunShape(actors=4, memory_mb=1024, batch=128) if record.iteration == 0 else None


def test_controller_changes_apply_from_the_next_iteration(tmp_path: Path) -> None:
    backend = InProcessBackend()
    ctrl = ScriptedController()
    result = train(_spec(tmp_path, max_steps=256 + 128), backend=backend, controller=ctrl, probe_noise_every=1, progress=False)
    assert backend.calls == [(2, 1769, 2), (4, 1024, 4)]
    assert result.config_changes[0]["to"] == {"actors": 4, "memory_mb": 1024, "batch": 128}
    gn = ctrl.records[0].grad_noise
    assert gn is not None and gn["b_small"] == 64 and gn["b_big"] == 256 and len(gn["small_sqnorms"]) == 4


class BusyController:
    """Burns about 30 ms of CPU per call and changes nothing."""

    def __init__(self) -> None:
        self.calls = 0

    def after_iteration(self, record: IterationRecord) -> RunShape | None:
        self.calls += 1
        end = time.thread_time() + 0.03
        while time.thread_time() < end:
            pass
        return None


def test_the_controllers_time_is_charged_to_the_learner_host(tmp_path: Path) -> None:
    ctrl = BusyController()
    run = RunShape(actors=2, memory_mb=1769, batch=128)
    result = train(_spec(tmp_path, max_steps=3 * 128, run=run), backend=InProcessBackend(), controller=ctrl, progress=False)
    assert len(result.iterations) == 3 and ctrl.calls == 3  # after every iteration (the protocol's promise)
    # the controller's work is in the run's time and the learner VM's bill, not in the iterations
    assert result.controller_s >= 3 * 0.03 * 0.5  # CPU burnt, whatever the measured backend's wall adds
    iterations_s = sum(r.iteration_lambda_s for r in result.iterations)
    assert result.lambda_time_s == pytest.approx(iterations_s + result.controller_s)
    assert result.ledger.learner_seconds == pytest.approx(result.lambda_time_s)
    assert result.to_dict()["controller_s"] == result.controller_s
    # without a controller nothing is added
    plain = train(_spec(tmp_path / "plain", max_steps=3 * 128, run=run), backend=InProcessBackend(), progress=False)
    assert plain.controller_s == 0.0
    assert plain.lambda_time_s == pytest.approx(sum(r.iteration_lambda_s for r in plain.iterations))


def test_grad_noise_probe_is_consistent() -> None:
    rng = np.random.default_rng(0)
    n = 512
    batch = {
        "obs": rng.standard_normal((n, 4)).astype(np.float32),
        "actions": rng.integers(0, 2, n),
        "logprobs": np.full(n, np.log(0.5), np.float32),
        "values": np.zeros(n, np.float32),
        "advantages": rng.standard_normal(n).astype(np.float32),
        "returns": rng.standard_normal(n).astype(np.float32),
    }
    learner = PPOLearner(PolicySpec(4, "discrete", 2), PPOConfig(minibatch_size=128, epochs=1), seed=0)
    stats = learner.update(batch, probe_noise=True)
    gn = stats["grad_noise"]
    assert gn["b_small"] == 128 and gn["b_big"] == 512 and len(gn["small_sqnorms"]) == 4
    # |mean of g_i|^2 <= mean of |g_i|^2 (convexity), strictly for noisy minibatches
    assert 0 < gn["big_sqnorm"] < np.mean(gn["small_sqnorms"])


def test_gae_by_hand() -> None:
    r = np.array([1.0, 1.0, 1.0, 1.0], np.float32)
    v = np.array([0.5, 0.5, 0.5, 0.5], np.float32)
    term = np.array([False, True, False, False])
    trunc = np.zeros(4, bool)
    adv, ret = compute_gae(r, v, term, trunc, np.zeros(4, np.float32), last_value=2.0, gamma=0.9, lam=0.5)
    d3 = 1 + 0.9 * 2.0 - 0.5
    d2 = 1 + 0.9 * 0.5 - 0.5
    d1 = 1 - 0.5  # terminal: no bootstrap
    d0 = 1 + 0.9 * 0.5 - 0.5
    np.testing.assert_allclose(adv, [d0 + 0.45 * d1, d1, d2 + 0.45 * d3, d3], rtol=1e-6)
    np.testing.assert_allclose(ret, adv + v, rtol=1e-6)
    # a time-limit truncation bootstraps V(final obs) and cuts the chain
    trunc = np.array([False, True, False, False])
    adv, _ = compute_gae(r, v, np.zeros(4, bool), trunc, np.array([0, 3.0, 0, 0], np.float32), 2.0, 0.9, 0.5)
    assert adv[1] == pytest.approx(1 + 0.9 * 3.0 - 0.5)


def test_resume_continues_from_the_last_checkpoint(tmp_path: Path) -> None:
    first = train(_spec(tmp_path, max_steps=512), backend=InProcessBackend(), progress=False)
    assert (tmp_path / "ckpt" / "checkpoint.npz").exists()  # one file: the learner and the run state
    backend = InProcessBackend()
    resumed = train(_spec(tmp_path, max_steps=1024, resume=True), backend=backend, progress=False)
    assert len(backend.calls) == 2  # only the two remaining iterations ran
    assert resumed.env_steps == 1024
    assert [c["iteration"] for c in resumed.curve] == [0, 1, 2, 3]
    assert resumed.curve[:2] == first.curve
    assert resumed.ledger.requests == 8
    assert any("resumed" in n for n in resumed.notes)


def test_learner_state_round_trip(tmp_path: Path) -> None:
    import torch

    spec = PolicySpec(4, "discrete", 2)
    a = PPOLearner(spec, PPOConfig(), seed=1)
    torch.save(a.state_dict(), tmp_path / "s.pt")
    b = PPOLearner(spec, PPOConfig(), seed=2)
    b.load_state_dict(torch.load(tmp_path / "s.pt", weights_only=True))
    for pa, pb in zip(a.model.parameters(), b.model.parameters()):
        assert torch.equal(pa, pb)
    assert a.rng.random() == b.rng.random()


def test_resume_without_checkpoint_is_a_user_error(tmp_path: Path) -> None:
    with pytest.raises(UserError, match="no checkpoint"):
        train(_spec(tmp_path, resume=True), backend=InProcessBackend(), progress=False)


@pytest.mark.parametrize(
    "change, match",
    [
        ({"env_id": "NoSuchEnv-v0"}, "unknown gymnasium env id"),
        ({"env_id": "CarRacing-v3"}, "supported"),
        # a RunShape checks its own fields when made (tests/serverless/test_run_shape.py)
        ({"run": {"actors": 2, "memory_mb": 1769, "batch": 256}}, "run must be a RunShape"),
        ({"resume_run": "actors=2,memory=1769,batch=256"}, "resume_run must be a RunShape"),
        ({"architecture": "sparc"}, "allowed"),
        ({"max_steps": 0}, "max steps"),
        ({"target_reward": float("nan")}, "target reward"),
    ],
)
def test_bad_input_fails_before_any_work(tmp_path: Path, change: dict[str, Any], match: str) -> None:
    backend = InProcessBackend()
    with pytest.raises(UserError, match=match):
        train(_spec(tmp_path, **change), backend=backend, progress=False)
    assert backend.calls == []


def test_unknown_env_suggests_close_names() -> None:
    from serverless.envs import inspect_env

    with pytest.raises(UserError, match="did you mean CartPole-v1"):
        inspect_env("CartPol-v1")


@pytest.mark.parametrize(
    "args",
    [
        ["--env", "NoSuchEnv-v0", "--target-reward", "1"],
        ["--env", "CartPole-v1", "--target-reward", "475", "--memory-mb", "50"],
        ["--env", "CartPole-v1", "--target-reward", "475", "--actors", "0"],
    ],
)
def test_cli_bad_input_is_a_clean_error(tmp_path: Path, args: list[str]) -> None:
    out = tmp_path / "r.json"
    proc = subprocess.run(
        [sys.executable, "-m", "trainwise", "rl", "train", *args, "--json-out", str(out)],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 2
    assert "Traceback" not in proc.stderr and "error" in proc.stderr
    assert not out.exists()


def test_continuous_env_trains_end_to_end(tmp_path: Path) -> None:
    result = train(_spec(tmp_path, env_id="Pendulum-v1", max_steps=512), backend=InProcessBackend(), progress=False)
    assert result.env_steps == 512 and result.config["policy_spec"]["action_kind"] == "continuous"
    assert all(np.isfinite(r.ppo_stats["policy_loss"]) for r in result.iterations)


def test_billed_attempts_that_were_retried_are_in_the_ledger() -> None:
    """The Lambda backend reports attempts that ran, were billed, failed and were retried
    beside the one invocation per event; the ledger pays for both, the retried one as a fault."""
    from dataclasses import dataclass, field

    from serverless.ledger import CostLedger
    from serverless.pricing import PriceTable
    from serverless.rollouts import RolloutRetryPolicy, RolloutCollector
    from serverless.trainer import bill_rollouts

    @dataclass
    class RetriedBatch(InvokeBatch):
        retried_billing: list[BillingRecord] = field(default_factory=list)

    ok = BillingRecord(billed_ms=100, duration_ms=99.2, init_ms=0.0, memory_mb=1024, label="billed")
    failed = BillingRecord(billed_ms=50, duration_ms=49.1, init_ms=0.0, memory_mb=1024, error="Unhandled", label="billed")

    class OneShot:
        name = "oneshot"

        def invoke(self, events: list[dict[str, Any]], memory_mb: int, concurrency: int | None = None) -> InvokeBatch:
            return RetriedBatch([Invocation({"env_steps": 1}, ok)], 0.2, 0.2, "measured", 1, retried_billing=[failed])

    got = RolloutCollector(OneShot(), RolloutRetryPolicy(), hedge=False).collect([{"actor_id": 0}], 1024, 1, iteration=1)
    ledger = CostLedger(PriceTable.load())
    bill_rollouts(ledger, got, [])
    assert got.results == [{"env_steps": 1}]
    assert ledger.requests == 2
    assert ledger.gb_seconds == pytest.approx((100 + 50) / 1000 * 1024 / 1024)
    assert ledger.label == "billed"
    assert ledger.fault_costs["errors"]["invocations"] == 1
