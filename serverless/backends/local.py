"""The local backend: an honest emulator of AWS Lambda on this machine.

- **Workers.** A pool of persistent worker processes (``local_worker``), each a
  function instance running the very same ``handler``. At most one per core run at
  once: concurrency is bounded by the machine, and the result says so when more was
  asked. Events go to worker ``actor_id % workers``, so an actor stays warm
  (its env mid-episode) across iterations, as a warm Lambda container would.
- **CPU share.** A function with memory M gets M/1769 of a vCPU. Below one vCPU
  the worker is duty-cycle throttled (:mod:`serverless.throttle`): stopped once it
  has used its CPU quota for the period. Above one vCPU nothing changes: the
  handler is single-threaded.
- **Cold starts.** An actor's first invocation on a worker (or after the memory
  size changes, which on Lambda means new instances) is cold: the handler makes
  and resets a fresh env, and the model adds sandbox start and import time.
- **Two clocks.** ``wall_s`` is measured here. ``lambda_s`` is *modelled*
  (:mod:`serverless.lambda_clock`): every invocation timed as if on its own
  Lambda instance at the requested concurrency, from its measured CPU time
  (corrected for the host's momentary speed, :mod:`serverless.host_speed`) scaled
  to its CPU share, plus cold starts and invoke overhead. Billing records are the
  modelled durations rounded up to 1 ms, labelled "modelled".
"""

from __future__ import annotations

import os
import select
import signal
import subprocess
import sys
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

from serverless.invocation import LAMBDA_MAX_TIMEOUT_S, BillingRecord, Invocation, InvokeBatch
from serverless.backends.local_worker import WorkerMessage, WorkerReply, read_frame, write_frame
from serverless.envs import user_import_paths
from serverless.invocation import check_memory_mb
from serverless.lambda_clock import (
    DEFAULT_COLD_START_MS,
    DEFAULT_INVOKE_OVERHEAD_MS,
    ModelledInvocation,
    cpu_share,
    model_batch,
)
from serverless.pricing import billed_ms
from serverless.throttle import DEFAULT_PERIOD_S, DutyCycleThrottle, process_cpu_seconds, run_throttled
from serverless.rollout_event import RolloutEvent, RolloutReply

_PROJECT_ROOT = str(Path(__file__).resolve().parents[2])


class WorkerTimeout(Exception):
    """An invocation ran past the backend's timeout; its worker was killed."""


class _Worker:
    """One worker process and the pipe to it."""

    def __init__(self) -> None:
        env = dict(os.environ)
        for var in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
            env[var] = "1"  # one function = one single-threaded handler
        # the project and every user directory on this process's path (an env module's among them)
        env["PYTHONPATH"] = os.pathsep.join([_PROJECT_ROOT, *user_import_paths(), env.get("PYTHONPATH", "")])
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "serverless.backends.local_worker"],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            env=env,
        )
        assert self.proc.stdin is not None and self.proc.stdout is not None
        self.stdin = self.proc.stdin
        self.stdout = self.proc.stdout
        ready = read_frame(self.stdout)
        if not ready or not ready.get("ready"):
            raise RuntimeError("local worker failed to start (see stderr above)")
        self.import_ms = float(ready["import_ms"])
        self.cpu_seconds = process_cpu_seconds(self.proc.pid)

    def alive(self) -> bool:
        return self.proc.poll() is None

    def request(
        self, message: WorkerMessage, share: float | None, period_s: float, timeout_s: float | None = None
    ) -> tuple[WorkerReply | None, float]:
        """Send one message, wait for the reply (throttled when ``share`` < 1).

        Past ``timeout_s`` the worker is killed (like a Lambda timeout: the instance is
        gone) and :class:`WorkerTimeout` is raised.
        """
        write_frame(self.stdin, message)
        fd = self.stdout.fileno()
        deadline = None if timeout_s is None else time.monotonic() + timeout_s

        def finished(wait_s: float) -> bool:
            if deadline is not None:
                wait_s = max(0.0, min(wait_s, deadline - time.monotonic()))
            ready, _, _ = select.select([fd], [], [], wait_s)
            if ready or not self.alive():
                return True
            if deadline is not None and time.monotonic() >= deadline:
                self.proc.kill()
                self.proc.wait()
                raise WorkerTimeout(f"Task timed out after {timeout_s:.2f} seconds")
            return False

        paused = 0.0
        if share is not None and share < 1.0:
            throttle = DutyCycleThrottle(share=share, cpu_time=self.cpu_seconds, period_s=period_s)
            run_throttled(
                throttle,
                finished,
                pause=lambda: self._signal(signal.SIGSTOP),
                resume=lambda: self._signal(signal.SIGCONT),
            )
            paused = throttle.paused_s
        else:
            while not finished(1.0):
                pass
        return read_frame(self.stdout), paused

    def _signal(self, sig: int) -> None:
        if self.alive():
            os.kill(self.proc.pid, sig)

    def close(self) -> None:
        if self.alive():
            try:
                write_frame(self.stdin, {"op": "exit"})
                self.proc.wait(timeout=5)
            except (BrokenPipeError, OSError, subprocess.TimeoutExpired):
                self.proc.kill()
                self.proc.wait()


@dataclass
class _Outcome:
    result: RolloutReply | None
    error: str | None
    modelled: ModelledInvocation


class LocalBackend:
    """Lambda emulator on local worker processes (see module docstring)."""

    name = "local"

    def __init__(
        self,
        max_workers: int | None = None,
        throttle: bool = True,
        throttle_period_s: float = DEFAULT_PERIOD_S,
        invoke_overhead_ms: float = DEFAULT_INVOKE_OVERHEAD_MS,
        cold_start_ms: float = DEFAULT_COLD_START_MS,
        timeout_s: float | None = LAMBDA_MAX_TIMEOUT_S,
    ) -> None:
        self.cores = os.cpu_count() or 1
        self.max_workers = max(1, max_workers or self.cores)
        self.throttle = throttle
        self.throttle_period_s = throttle_period_s
        self.invoke_overhead_ms = invoke_overhead_ms
        self.cold_start_ms = cold_start_ms
        if timeout_s is not None and timeout_s <= 0:
            raise ValueError(f"timeout_s must be > 0 or None, got {timeout_s}")
        self.timeout_s = timeout_s
        self._workers: list[_Worker] = []
        self._memory_mb: int | None = None
        self._pool: ThreadPoolExecutor | None = None
        self._pool_size = 0
        self._lock = threading.Lock()

    # ------------------------------------------------------------------ workers
    def _ensure_workers(self, n: int) -> list[_Worker]:
        while len(self._workers) < n:
            self._workers.append(_Worker())
        for i, w in enumerate(self._workers[:n]):
            if not w.alive():  # a crashed instance is replaced by a cold one
                self._workers[i] = _Worker()
        if self._pool is None or self._pool_size < n:
            if self._pool is not None:
                self._pool.shutdown()
            self._pool = ThreadPoolExecutor(max_workers=n, thread_name_prefix="trainwise-local")
            self._pool_size = n
        return self._workers[:n]

    def _reset_all(self) -> None:
        for w in self._workers:
            if w.alive():
                w.request({"op": "reset"}, None, self.throttle_period_s)

    # ------------------------------------------------------------------ invoke
    def _run_on(self, slot: int, events: list[tuple[int, RolloutEvent]], memory_mb: int) -> list[tuple[int, _Outcome]]:
        share = cpu_share(memory_mb)
        out: list[tuple[int, _Outcome]] = []
        for index, event in events:
            worker = self._workers[slot]
            if not worker.alive():  # killed by a timeout or crashed: a new, cold instance
                worker = self._workers[slot] = _Worker()
            try:
                reply, paused = worker.request(
                    {"op": "invoke", "event": event},
                    share if self.throttle else None,
                    self.throttle_period_s,
                    self.timeout_s,
                )
            except WorkerTimeout as exc:
                reply, paused = {"ok": False, "error": str(exc), "timed_out": True}, 0.0
            except (BrokenPipeError, OSError) as exc:
                reply, paused = {"ok": False, "error": f"worker failed: {exc}"}, 0.0
            if reply is None:
                reply = {"ok": False, "error": "worker process died during the invocation"}
            if reply.get("ok"):
                result = reply["result"]
                cold = bool(result.get("cold_start"))
                factor = float(reply.get("speed_factor", 1.0))
                cpu_ms = float(reply["cpu_ms"]) * factor  # in reference-host CPU ms (serverless.host_speed)
                result["emulator"] = {
                    "measured_wall_ms": float(reply["wall_ms"]),
                    "measured_cpu_ms": float(reply["cpu_ms"]),
                    "host_speed": factor,
                    "throttled_s": paused,
                }
                result["lane"] = slot  # the worker: its events run one after another
                error = None
            else:
                result, cold, error = None, False, str(reply.get("error"))
                # a timed-out function is billed for the whole timeout, as on Lambda
                cpu_ms = self.timeout_s * 1000.0 * min(share, 1.0) if reply.get("timed_out") and self.timeout_s else 0.0
            init_ms = worker.import_ms if cold else 0.0
            modelled = ModelledInvocation(cpu_ms=cpu_ms, cpu_share=share, cold=cold, init_ms=init_ms)
            out.append((index, _Outcome(result, error, modelled)))
        return out

    def invoke(self, events: list[RolloutEvent], memory_mb: int, concurrency: int | None = None) -> InvokeBatch:
        check_memory_mb(memory_mb)
        if not events:
            return InvokeBatch([], 0.0, 0.0, "modelled", concurrency or 0)
        concurrency = len(events) if concurrency is None else int(concurrency)
        if concurrency < 1:
            raise ValueError(f"concurrency must be >= 1, got {concurrency}")
        notes: list[str] = []
        n_workers = min(concurrency, self.max_workers, len(events))
        if concurrency > self.cores:
            notes.append(
                f"asked concurrency {concurrency} exceeds this machine's {self.cores} cores: the local backend "
                f"runs {n_workers} functions at a time (measured wall_s); lambda_s models {concurrency} concurrent "
                "Lambda instances"
            )
        with self._lock:
            t0 = time.perf_counter()
            workers = self._ensure_workers(n_workers)
            if self._memory_mb is not None and memory_mb != self._memory_mb:
                self._reset_all()  # a new memory size is a new function version: cold instances
            self._memory_mb = memory_mb
            assigned: list[list[tuple[int, RolloutEvent]]] = [[] for _ in workers]
            for i, event in enumerate(events):
                assigned[int(event.get("actor_id", i)) % n_workers].append((i, event))
            assert self._pool is not None
            futures = [self._pool.submit(self._run_on, slot, jobs, memory_mb) for slot, jobs in enumerate(assigned) if jobs]
            outcomes: dict[int, _Outcome] = {}
            for fut in futures:
                outcomes.update(dict(fut.result()))
            wall_s = time.perf_counter() - t0

        ordered = [outcomes[i] for i in range(len(events))]
        clock = model_batch(
            [o.modelled for o in ordered],
            concurrency,
            invoke_overhead_ms=self.invoke_overhead_ms,
            cold_start_ms=self.cold_start_ms,
        )
        invocations: list[Invocation] = []
        for o, duration in zip(ordered, clock.durations_ms):
            billing = BillingRecord(
                billed_ms=billed_ms(duration),
                duration_ms=duration,
                init_ms=(self.cold_start_ms + o.modelled.init_ms) if o.modelled.cold else 0.0,
                memory_mb=memory_mb,
                error=o.error,
                cold_start=o.modelled.cold,
                label="modelled",
            )
            invocations.append(Invocation(o.result, billing))
        return InvokeBatch(
            invocations=invocations,
            wall_s=wall_s,
            lambda_s=clock.batch_s,
            lambda_s_label="modelled",
            concurrency=concurrency,
            notes=notes,
        )

    def close(self) -> None:
        for w in self._workers:
            w.close()
        self._workers.clear()
        if self._pool is not None:
            self._pool.shutdown()
            self._pool = None

    def __enter__(self) -> "LocalBackend":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __del__(self) -> None:  # best effort: never leave worker processes behind
        try:
            self.close()
        except Exception:
            pass
