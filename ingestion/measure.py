"""Measuring a pipeline configuration: rows per second, its spread, and peak memory.

Method (one measurement):

1. build a fresh dataset for the configuration and make an iterator;
2. warm up for ``warmup_s`` (fills the shuffle and prefetch buffers, starts threads);
3. ``repeats`` consecutive windows of ``window_s`` each: rows pulled / wall time;
4. report the median of the windows as ``rows_per_s``, their spread
   (``(max - min) / median``) and every window in ``extra["windows"]``.

Memory: the measurement runs in a **worker subprocess** (``python -m ingestion.measure
--worker``), so its resident memory is the pipeline's own plus TensorFlow's runtime,
not the tuner's. The worker is persistent (importing TensorFlow costs seconds) and
builds a fresh dataset for every configuration; before each one it resets the kernel's
peak-RSS counter (``/proc/self/clear_refs`` ← ``5``), so ``peak_rss_mb`` is the
process's peak *during this measurement* (``VmHWM``). ``extra["pipeline_rss_mb"]`` is
that peak minus the resident memory just before the dataset was built (the pipeline's
own buffers and threads). A watchdog thread in the worker stops it when RSS passes the
memory limit; the parent then reports ``failed=True`` and starts a new worker, so a
runaway configuration cannot take the tuner down. The protocol is JSON lines over pipes
(no pickle).

Per-stage timing: tf.data 2.21 has no public per-stage statistics (StatsAggregator is
gone), so with ``stage_profile=True`` and a spec that has ``build_upto`` each prefix of
the pipeline (read, read+shuffle, ...) is timed on its own (``repeats`` windows, their
median); a stage's cost shows as the drop in throughput after it. This is what the
simulator is calibrated from.
"""

from __future__ import annotations

import json
import os
import statistics
import subprocess
import sys
import threading
import time
from typing import IO, Any, Mapping

from ingestion.knobs import Config
from ingestion.pipeline import PipelineSpec, spec_from_reference
from ingestion.measurement import Measurement, MeasurementExtra
from core.errors import UserError
from core.json_edge import JsonObject

DEFAULT_WARMUP_S = 1.0
DEFAULT_WINDOW_S = 1.5
DEFAULT_REPEATS = 2


# ---------------------------------------------------------------------------------------
# Memory helpers (Linux /proc; elsewhere fall back to psutil's current RSS)
# ---------------------------------------------------------------------------------------
def _status_kb(field: str) -> float | None:
    try:
        with open("/proc/self/status") as fh:
            for line in fh:
                if line.startswith(field + ":"):
                    return float(line.split()[1])
    except OSError:
        return None
    return None


def current_rss_mb() -> float:
    kb = _status_kb("VmRSS")
    if kb is not None:
        return kb / 1024
    import psutil

    return psutil.Process().memory_info().rss / 2**20


def reset_peak_rss() -> bool:
    """Reset the kernel's peak-RSS counter for this process (Linux >= 4.0)."""
    try:
        with open("/proc/self/clear_refs", "w") as fh:
            fh.write("5")
        return True
    except OSError:
        return False


def peak_rss_mb() -> float:
    kb = _status_kb("VmHWM")
    return kb / 1024 if kb is not None else current_rss_mb()


# ---------------------------------------------------------------------------------------
# The measurement itself (runs in the worker, or in-process)
# ---------------------------------------------------------------------------------------
def _element_rows(element: Any) -> int:
    import tensorflow as tf

    first = tf.nest.flatten(element)[0]
    shape = first.shape
    return int(shape[0]) if shape.rank else 1


def process_cpu_s() -> float:
    """CPU seconds (user + system) of every thread of this process so far."""
    t = os.times()
    return t.user + t.system


def machine_busy_s() -> float | None:
    """CPU seconds every process on the machine has spent busy so far (``/proc/stat``: all but
    idle and iowait), or None where there is no ``/proc/stat``."""
    try:
        with open("/proc/stat") as fh:
            fields = fh.readline().split()
    except OSError:
        return None
    if not fields or fields[0] != "cpu":
        return None
    ticks = [int(x) for x in fields[1:]]
    busy = sum(ticks[:8]) - ticks[3] - (ticks[4] if len(ticks) > 4 else 0)  # guest time is inside user
    return busy / (os.sysconf("SC_CLK_TCK") or 100)


def _time_iterator(
    it: Any, rows_fixed: int | None, warmup_s: float, window_s: float, repeats: int, totals: dict[str, float] | None = None
) -> list[float]:
    """Warm up, then time ``repeats`` windows; per window rows/s. ``totals`` gets rows, seconds
    and the process's CPU seconds over the windows (``cpu_s``)."""
    deadline = time.perf_counter() + warmup_s
    while time.perf_counter() < deadline:
        next(it)
    windows: list[float] = []
    all_rows = 0
    all_s = 0.0
    cpu0 = process_cpu_s()
    machine0 = machine_busy_s()
    for _ in range(repeats):
        rows = 0
        start = time.perf_counter()
        end = start + window_s
        while True:
            element = next(it)
            rows += rows_fixed if rows_fixed is not None else _element_rows(element)
            now = time.perf_counter()
            if now >= end:
                break
        windows.append(rows / (now - start))
        all_rows += rows
        all_s += now - start
    if totals is not None:
        cpu_s = process_cpu_s() - cpu0
        machine1 = machine_busy_s()
        totals.update(rows=all_rows, elapsed_s=all_s, cpu_s=cpu_s)
        if machine0 is not None and machine1 is not None:
            # what every other process kept busy meanwhile (never below 0: the two clocks tick apart)
            totals["other_cpu_s"] = max(0.0, machine1 - machine0 - cpu_s)
    return windows


def measure_in_process(
    spec: PipelineSpec,
    config: Mapping[str, int],
    *,
    warmup_s: float = DEFAULT_WARMUP_S,
    window_s: float = DEFAULT_WINDOW_S,
    repeats: int = DEFAULT_REPEATS,
    stage_profile: bool = False,
) -> Measurement:
    """Measure ``config`` in this process (RSS figures then include the caller's memory)."""
    config = dict(config)
    rows_fixed = spec.rows_in(config)
    before = current_rss_mb()
    reset_peak_rss()
    t0 = time.perf_counter()
    ds = spec.build(config)
    it = iter(ds)
    first = next(it)  # includes graph tracing and thread start-up
    if rows_fixed is None:
        _element_rows(first)
    startup_s = time.perf_counter() - t0
    totals: dict[str, float] = {}
    windows = _time_iterator(it, rows_fixed, warmup_s, window_s, repeats, totals)
    peak = peak_rss_mb()
    del it, ds
    median = statistics.median(windows)
    extra: MeasurementExtra = {
        "windows_rows_per_s": windows,
        "spread": (max(windows) - min(windows)) / median if median > 0 else 0.0,
        "rows": int(totals["rows"]),
        "elapsed_s": totals["elapsed_s"],
        # cores this process kept busy over the windows (every thread: the pipeline's, tf.data's
        # intra-op work and the consuming loop): CPU seconds / wall seconds
        "cores_busy": totals["cpu_s"] / totals["elapsed_s"] if totals["elapsed_s"] > 0 else 0.0,
        # cores every *other* process on the machine kept busy over the same windows (another
        # job outside the bench lock shows here; on Linux with sched_autogroup a niced job of
        # another session still takes its session's fair share of the cores)
        "other_cores_busy": (totals["other_cpu_s"] / totals["elapsed_s"]
                             if "other_cpu_s" in totals and totals["elapsed_s"] > 0 else None),
        "startup_s": startup_s,
        "rss_before_mb": before,
        "pipeline_rss_mb": max(0.0, peak - before),
        "warmup_s": warmup_s,
        "window_s": window_s,
        "repeats": repeats,
    }
    if stage_profile and spec.build_upto is not None and spec.stages:
        cores: dict[str, float] = {}
        extra["stage_rows_per_s"] = profile_stages(spec, config, warmup_s=min(warmup_s, 1.0), window_s=window_s,
                                                     repeats=repeats, cores=cores)
        extra["stage_cores_busy"] = cores
    return Measurement(rows_per_s=median, peak_rss_mb=peak, label="measured", extra=extra)


def profile_stages(
    spec: PipelineSpec, config: Config, *, warmup_s: float, window_s: float, repeats: int = 1,
    cores: dict[str, float] | None = None,
) -> dict[str, float]:
    """Rows/s of each prefix of the pipeline (read, read+shuffle, ..., full): the median of
    ``repeats`` windows each. ``cores`` (optional) gets each prefix's cores busy (this process's
    CPU seconds over its windows / their wall seconds)."""
    assert spec.build_upto is not None
    out: dict[str, float] = {}
    for stage in spec.stages:
        it = iter(spec.build_upto(config, stage))
        totals: dict[str, float] = {}
        out[stage] = statistics.median(_time_iterator(it, None, warmup_s, window_s, max(1, repeats), totals))
        if cores is not None and totals.get("elapsed_s", 0) > 0:
            cores[stage] = totals["cpu_s"] / totals["elapsed_s"]
    return out


# ---------------------------------------------------------------------------------------
# The worker process and its client
# ---------------------------------------------------------------------------------------
class MeasureWorker:
    """A persistent worker subprocess that measures configurations of one pipeline.

    ``memory_limit_mb`` caps the worker's RSS: past it the worker exits and the
    measurement is reported as out-of-memory. A worker that answers nothing within the
    protocol's time plus ``hang_margin_s`` is killed (a hang); one that dies, or answers
    something that is not a measurement, is replaced. Either way the configuration is
    reported failed with the reason (``extra["failure"]``) and the next one gets a fresh
    worker. Use as a context manager.
    """

    def __init__(self, spec: PipelineSpec, *, memory_limit_mb: float | None = None, python: str | None = None,
                 hang_margin_s: float = 60.0):
        if not spec.portable:
            raise ValueError("MeasureWorker needs a spec with a factory; use measure_in_process")
        self.spec = spec
        self.memory_limit_mb = memory_limit_mb
        self.python = python or sys.executable
        self._proc: subprocess.Popen[str] | None = None
        self.restarts = 0
        self.hang_margin_s = hang_margin_s

    # -- process management --------------------------------------------------------
    def _start(self) -> subprocess.Popen[str]:
        env = dict(os.environ)
        env.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
        args = [self.python, "-m", "ingestion.measure", "--worker"]
        if self.memory_limit_mb:
            args += ["--memory-limit-mb", str(self.memory_limit_mb)]
        proc = subprocess.Popen(
            args, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True, env=env
        )
        assert proc.stdin is not None
        proc.stdin.write(json.dumps({"spec": self.spec.reference()}) + "\n")
        proc.stdin.flush()
        hello = self._read(proc, timeout_s=120)
        if hello is None or not hello.get("ready"):
            code = self._exit_code(proc)
            self._kill(proc)
            if code == _OOM_EXIT:
                raise _OutOfMemory()
            raise UserError(f"measurement worker failed to start: {hello.get('error') if hello else f'exit {code}'}")
        return proc

    @staticmethod
    def _read(proc: subprocess.Popen[str], timeout_s: float) -> JsonObject | None:
        assert proc.stdout is not None
        result: list[str] = []
        reader = threading.Thread(target=lambda: result.append(proc.stdout.readline()), daemon=True)  # type: ignore[union-attr]
        reader.start()
        reader.join(timeout_s)
        if not result or not result[0]:
            return None
        try:
            answer = json.loads(result[0])
        except ValueError:
            answer = None
        return answer if isinstance(answer, dict) else {"garbled": result[0][:200]}

    @staticmethod
    def _exit_code(proc: subprocess.Popen[str]) -> int | None:
        """The worker's exit code once its output ended (None if it is still running: a hang)."""
        try:
            return proc.wait(timeout=5)
        except subprocess.TimeoutExpired:
            return None

    @staticmethod
    def _kill(proc: subprocess.Popen[str]) -> None:
        if proc.poll() is None:
            proc.kill()
        proc.wait()

    def close(self) -> None:
        if self._proc is not None:
            try:
                if self._proc.stdin:
                    self._proc.stdin.close()
                self._proc.wait(timeout=10)
            except (OSError, subprocess.TimeoutExpired):
                self._kill(self._proc)
            self._proc = None

    def __enter__(self) -> "MeasureWorker":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- measuring -------------------------------------------------------------------
    def measure(
        self,
        config: Mapping[str, int],
        *,
        warmup_s: float = DEFAULT_WARMUP_S,
        window_s: float = DEFAULT_WINDOW_S,
        repeats: int = DEFAULT_REPEATS,
        stage_profile: bool = False,
    ) -> Measurement:
        if self._proc is None or self._proc.poll() is not None:
            try:
                self._proc = self._start()
            except _OutOfMemory:
                self.restarts += 1
                return self._failed(config, "memory limit")
        request = {"config": dict(config), "warmup_s": warmup_s, "window_s": window_s, "repeats": repeats,
                   "stage_profile": stage_profile}
        assert self._proc.stdin is not None
        try:
            self._proc.stdin.write(json.dumps(request) + "\n")
            self._proc.stdin.flush()
        except OSError:  # the worker died between two measurements
            answer = None
        else:
            budget = self.hang_margin_s + warmup_s + window_s * repeats * (1 + (len(self.spec.stages) if stage_profile else 0))
            answer = self._read(self._proc, timeout_s=budget)
        if answer is None:
            code = self._exit_code(self._proc)
            reason = "memory limit" if code == _OOM_EXIT else ("timeout" if code is None else f"worker exit {code}")
            return self._replace_worker(config, reason)
        if "garbled" in answer:
            return self._replace_worker(config, f"worker answered garbage: {answer['garbled']!r}")
        if "error" in answer:
            # A configuration the pipeline rejects is worth nothing, like one that runs out of
            # memory; the search goes on (the tuner reports the reason if nothing works).
            return self._failed(config, f"pipeline error: {answer['error']}")
        return Measurement(rows_per_s=answer["rows_per_s"], peak_rss_mb=answer["peak_rss_mb"], failed=False,
                           label="measured", extra=answer["extra"])


    def _replace_worker(self, config: Mapping[str, int], reason: str) -> Measurement:
        """Kill the worker (the next measurement starts a fresh one) and fail this configuration."""
        assert self._proc is not None
        self._kill(self._proc)
        self._proc = None
        self.restarts += 1
        return self._failed(config, reason)

    def _failed(self, config: Mapping[str, int], reason: str) -> Measurement:
        """A configuration that ran out of memory, hung or crashed the worker: worth nothing."""
        return Measurement(rows_per_s=0.0, peak_rss_mb=float(self.memory_limit_mb or 0.0), failed=True,
                           label="measured", extra={"failure": reason, "config": dict(config)})


_OOM_EXIT = 75


class _OutOfMemory(Exception):
    """The worker passed its memory limit before it was ready."""


def measure(
    spec: PipelineSpec,
    config: Mapping[str, int],
    *,
    warmup_s: float = DEFAULT_WARMUP_S,
    window_s: float = DEFAULT_WINDOW_S,
    repeats: int = DEFAULT_REPEATS,
    stage_profile: bool = False,
    memory_limit_mb: float | None = None,
) -> Measurement:
    """Measure one configuration: in a fresh worker process if the spec is portable.

    For many configurations keep one :class:`MeasureWorker` open instead (this starts
    and stops a worker, paying TensorFlow's import each time).
    """
    kw = dict(warmup_s=warmup_s, window_s=window_s, repeats=repeats, stage_profile=stage_profile)
    if not spec.portable:
        return measure_in_process(spec, config, **kw)
    with MeasureWorker(spec, memory_limit_mb=memory_limit_mb) as worker:
        return worker.measure(config, **kw)


def _watchdog(limit_mb: float) -> None:
    while True:
        if current_rss_mb() > limit_mb:
            os._exit(_OOM_EXIT)
        time.sleep(0.05)


def _worker_main(memory_limit_mb: float | None) -> int:
    # Protocol on a private copy of stdout; anything printed by TF goes to stderr.
    proto: IO[str] = os.fdopen(os.dup(1), "w", buffering=1)
    os.dup2(2, 1)
    if memory_limit_mb:
        threading.Thread(target=_watchdog, args=(memory_limit_mb,), daemon=True).start()

    def send(obj: JsonObject) -> None:
        proto.write(json.dumps(obj) + "\n")
        proto.flush()

    try:
        spec = spec_from_reference(json.loads(sys.stdin.readline())["spec"])
        import tensorflow as tf  # noqa: F401  (import once, before the first measurement)
    except Exception as exc:  # report, don't crash silently
        send({"ready": False, "error": f"{type(exc).__name__}: {exc}"})
        return 1
    send({"ready": True, "rss_mb": current_rss_mb()})
    for line in sys.stdin:
        req = json.loads(line)
        try:
            m = measure_in_process(spec, req["config"], warmup_s=req["warmup_s"], window_s=req["window_s"],
                                   repeats=req["repeats"], stage_profile=req.get("stage_profile", False))
            send({"rows_per_s": m.rows_per_s, "peak_rss_mb": m.peak_rss_mb, "extra": dict(m.extra)})
        except Exception as exc:
            send({"error": f"{type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''}"})
    return 0


if __name__ == "__main__":
    import argparse

    p = argparse.ArgumentParser(description="trainwise measurement worker (JSON lines on stdin/stdout)")
    p.add_argument("--worker", action="store_true", required=True)
    p.add_argument("--memory-limit-mb", type=float, default=None)
    a = p.parse_args()
    sys.exit(_worker_main(a.memory_limit_mb))
