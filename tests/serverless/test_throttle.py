"""Duty-cycle throttle arithmetic with an injected clock (no wall-clock thresholds)."""

from __future__ import annotations

import pytest

from serverless.lambda_clock import cpu_share
from serverless.throttle import DutyCycleThrottle, run_throttled


class FakeProcess:
    """A CPU-bound process on a fake clock: it burns CPU whenever it is not stopped."""

    def __init__(self, work_s: float) -> None:
        self.now = 0.0
        self.cpu = 0.0
        self.work_s = work_s
        self.stopped = False
        self.pauses: list[tuple[float, float]] = []  # (start, length)

    def clock(self) -> float:
        return self.now

    def cpu_time(self) -> float:
        return self.cpu

    def advance(self, dt: float) -> None:
        if not self.stopped:
            dt = min(dt, self.work_s - self.cpu)
            self.cpu += dt
        self.now += dt

    def finished(self, timeout: float) -> bool:
        if self.cpu >= self.work_s - 1e-12:
            return True
        self.advance(timeout)
        return self.cpu >= self.work_s - 1e-12

    def sleep(self, s: float) -> None:
        self.pauses.append((self.now, s))
        self.now += s  # stopped: no CPU

    def pause(self) -> None:
        self.stopped = True

    def resume(self) -> None:
        self.stopped = False


def _run(share: float, work_s: float, period_s: float = 0.02, tick_s: float = 0.001) -> tuple[FakeProcess, DutyCycleThrottle]:
    proc = FakeProcess(work_s)
    throttle = DutyCycleThrottle(share=share, cpu_time=proc.cpu_time, clock=proc.clock, period_s=period_s)
    run_throttled(throttle, proc.finished, proc.pause, proc.resume, sleep=proc.sleep, tick_s=tick_s)
    return proc, throttle


def test_quarter_share_runs_5_of_every_20_ms() -> None:
    proc, throttle = _run(share=0.25, work_s=0.100)
    assert throttle.quota_s == pytest.approx(0.005)
    # 100 ms of CPU at 5 ms per 20 ms period: 20 periods, the last one not paused
    assert throttle.periods_throttled == 19
    assert all(length == pytest.approx(0.015) for _, length in proc.pauses)
    assert proc.now == pytest.approx(19 * 0.020 + 0.005)
    assert throttle.paused_s == pytest.approx(19 * 0.015)


def test_long_run_share_matches_memory_share() -> None:
    share = cpu_share(512)  # 512/1769 of a vCPU
    proc, _ = _run(share=share, work_s=1.0, period_s=0.01, tick_s=0.0001)
    assert proc.cpu / proc.now == pytest.approx(share, rel=0.02)


def test_full_share_is_never_paused() -> None:
    proc, throttle = _run(share=1.0, work_s=0.2)
    assert not throttle.active or throttle.periods_throttled == 0
    assert proc.pauses == [] and proc.now == pytest.approx(0.2)
    proc, throttle = _run(share=2.5, work_s=0.2)  # above one vCPU: a single thread still runs flat out
    assert proc.pauses == [] and throttle.quota_s == pytest.approx(0.02)


def test_new_period_after_idle_time_starts_fresh() -> None:
    t = {"now": 0.0, "cpu": 0.0}
    throttle = DutyCycleThrottle(share=0.5, cpu_time=lambda: t["cpu"], clock=lambda: t["now"], period_s=0.1)
    throttle.start()
    t["now"], t["cpu"] = 0.04, 0.04
    assert throttle.check() == 0.0  # 40 ms of a 50 ms quota
    t["now"], t["cpu"] = 0.06, 0.06
    assert throttle.check() == pytest.approx(0.04)  # quota spent: pause to the period's end
    t["now"] = 0.35  # idle for a while: periods roll over without a pause
    assert throttle.check() == 0.0
    t["now"], t["cpu"] = 0.37, 0.09
    assert throttle.check() == 0.0  # 30 ms used in the period that started at 0.3


def test_bad_share_is_rejected() -> None:
    with pytest.raises(ValueError):
        DutyCycleThrottle(share=0.0, cpu_time=lambda: 0.0)


def test_overrun_counts_against_the_next_period() -> None:
    t = {"now": 0.0, "cpu": 0.0}
    throttle = DutyCycleThrottle(share=0.25, cpu_time=lambda: t["cpu"], clock=lambda: t["now"], period_s=0.02)
    throttle.start()
    t["now"], t["cpu"] = 0.007, 0.007  # checked late: 2 ms over the 5 ms quota
    assert throttle.check() == pytest.approx(0.013)
    t["now"] = 0.020
    assert throttle.check() == 0.0  # new period, 2 ms already spent
    t["now"], t["cpu"] = 0.023, 0.010
    assert throttle.check() == pytest.approx(0.017)  # 3 + 2 ms = the quota: pause to 0.040
