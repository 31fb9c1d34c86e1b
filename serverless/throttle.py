"""Duty-cycle CPU throttling, as Lambda's CPU quota does below one vCPU.

A function with memory M gets M/1769 of a vCPU. Linux enforces such a share with
CFS bandwidth control: in every period the cgroup may use ``share * period`` of CPU
time, then it is descheduled until the period ends. The local emulator does the same
to a worker process from outside: it watches the worker's CPU time and, once the
period's quota is spent, stops it (SIGSTOP) until the period ends (SIGCONT).

:class:`DutyCycleThrottle` holds only the arithmetic; the clock, the CPU-time
reader, sleeping and pausing are injected, so tests drive it with a fake clock.
The period is 20 ms by default (Linux's default CFS period is 100 ms; a shorter
period keeps short rollouts from being all-or-nothing; the long-run share is the
same).
"""

from __future__ import annotations

import os
import time
from dataclasses import dataclass, field
from typing import Callable

DEFAULT_PERIOD_S = 0.020


@dataclass
class DutyCycleThrottle:
    """Decides when a process has used its CPU quota for the current period."""

    share: float
    cpu_time: Callable[[], float]  # seconds of CPU the process has used so far
    clock: Callable[[], float] = time.monotonic
    period_s: float = DEFAULT_PERIOD_S
    _period_end: float = field(init=False, default=0.0)
    _cpu_at_start: float = field(init=False, default=0.0)
    paused_s: float = field(init=False, default=0.0)
    periods_throttled: int = field(init=False, default=0)

    def __post_init__(self) -> None:
        if not 0 < self.share:
            raise ValueError(f"share must be > 0, got {self.share}")
        if self.period_s <= 0:
            raise ValueError(f"period must be > 0, got {self.period_s}")

    @property
    def quota_s(self) -> float:
        """CPU seconds allowed per period."""
        return min(self.share, 1.0) * self.period_s

    @property
    def active(self) -> bool:
        return self.share < 1.0

    def start(self) -> None:
        now = self.clock()
        self._period_end = now + self.period_s
        self._cpu_at_start = self.cpu_time()

    def check(self) -> float:
        """Seconds to pause now (0.0 to keep running). Call often; starts new periods itself."""
        now = self.clock()
        if now >= self._period_end - 1e-9:
            # roll over to the period containing ``now``
            periods = int((now - self._period_end) // self.period_s) + 1
            self._period_end += periods * self.period_s
            cpu_now = self.cpu_time()
            # CPU used beyond the quota (the stop lands a tick late) counts against
            # the next period, so the long-run share stays exact
            overrun = max(0.0, cpu_now - self._cpu_at_start - self.quota_s) if periods == 1 else 0.0
            self._cpu_at_start = cpu_now - min(overrun, self.quota_s)
            return 0.0
        used = self.cpu_time() - self._cpu_at_start
        if used >= self.quota_s - 1e-9:  # within a nanosecond counts as spent
            pause = self._period_end - now
            self.paused_s += pause
            self.periods_throttled += 1
            return pause
        return 0.0


def run_throttled(
    throttle: DutyCycleThrottle,
    finished: Callable[[float], bool],
    pause: Callable[[], None],
    resume: Callable[[], None],
    sleep: Callable[[float], None] = time.sleep,
    tick_s: float = 0.001,
) -> None:
    """Enforce ``throttle`` until ``finished(timeout_s)`` says the work is done.

    ``finished`` waits up to ``timeout_s`` for completion (e.g. a select on the
    worker's pipe) and returns True when done. A pause stops the process, sleeps to
    the end of the period and resumes it.
    """
    throttle.start()
    while not finished(tick_s):
        wait = throttle.check()
        if wait > 0:
            pause()
            try:
                sleep(wait)
            finally:
                resume()
            throttle.check()  # start the next period


def process_cpu_seconds(pid: int) -> Callable[[], float]:
    """A reader for another process's CPU time, in seconds.

    Uses ``/proc/<pid>/schedstat`` (nanoseconds on the CPU) on Linux; elsewhere
    psutil's user+system time (coarser).
    """
    path = f"/proc/{pid}/schedstat"
    if os.path.exists(path):

        def read() -> float:
            with open(path) as fh:
                return int(fh.read().split()[0]) / 1e9

        return read
    import psutil

    proc = psutil.Process(pid)

    def read_psutil() -> float:
        t = proc.cpu_times()
        return t.user + t.system

    return read_psutil
