"""A real tf.data service: a dispatcher, worker processes (one per node), and a trainer-side reader.

:class:`LocalService` starts a ``DispatchServer`` in this process (fault-tolerant mode: its
journal lives in ``work_dir``, and workers that stop heart-beating are dropped after
``worker_timeout_ms`` so their jobs go on with the rest) and one worker process per entry of
``workers``, each ``python -m ingestion.cluster.worker`` pinned to its own CPUs
(``os.sched_setaffinity``, and TensorFlow's thread pools sized to them): one process stands for
one node, its CPU set for the node's vCPUs. With ``workers=[]`` it is a dispatcher alone (on a
fixed ``port`` if given), whose workers start elsewhere: on nodes running the node agent
(:mod:`ingestion.cluster.agent`, which starts this worker module with ``--worker-address`` set
to the node's private address). :class:`RemoteService` only names a dispatcher that runs elsewhere.

:func:`read` is the trainer side: it reads a dataset through ``distribute(...)``
(``processing_mode="distributed_epoch"``, so each split of the source goes to one worker and no
row is delivered twice) and counts rows and elements. A worker lost mid-epoch loses at most the
elements it held; the job finishes on the remaining workers. :class:`Feed` is the same reading
for a trainer that trains on what it reads (``ingestion.cluster.trainer.train_on``): one or more
datasets, prefetched a few batches ahead into one queue, as NumPy batches.
"""

from __future__ import annotations

import os
import queue
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Mapping, Sequence

#: How often the dispatcher checks for workers that stopped heart-beating (ms); TensorFlow's default
#: is ten minutes, which would stall a job whose worker died for that long.
GC_CHECK_MS = 500
WORKER_TIMEOUT_MS = 1000
HEARTBEAT_MS = 200


def _free_port() -> int:
    import socket

    with socket.socket() as s:
        s.bind(("localhost", 0))
        return int(s.getsockname()[1])


@dataclass
class LocalService:
    """Dispatcher in this process plus one worker process per CPU set in ``workers`` (None: all CPUs)."""

    workers: Sequence[Sequence[int] | None]
    work_dir: str | None = None
    port: int = 0
    fault_tolerant: bool = True
    worker_timeout_ms: int = WORKER_TIMEOUT_MS
    _dispatcher: Any = None
    _procs: list[subprocess.Popen] = field(default_factory=list)
    _tmp: Any = None

    def __enter__(self) -> "LocalService":
        self.start()
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    @property
    def target(self) -> str:
        return self._dispatcher.target

    @property
    def address(self) -> str:
        return self.target.split("://", 1)[1]

    @property
    def bound_port(self) -> int:
        return int(self.address.rsplit(":", 1)[1])

    def start(self) -> None:
        import tensorflow as tf

        if self.work_dir is None:
            self._tmp = tempfile.TemporaryDirectory(prefix="tw-dispatcher-")
            self.work_dir = self._tmp.name
        config = tf.data.experimental.service.DispatcherConfig(
            port=self.port, work_dir=self.work_dir, fault_tolerant_mode=self.fault_tolerant,
            worker_timeout_ms=self.worker_timeout_ms, job_gc_check_interval_ms=GC_CHECK_MS, job_gc_timeout_ms=60_000)
        self._dispatcher = tf.data.experimental.service.DispatchServer(config)
        for cpus in self.workers:
            self._procs.append(start_worker(self.address, cpus))

    def wait_ready(self, timeout_s: float = 180.0) -> None:
        """Block until every worker process has registered with the dispatcher (TensorFlow imports are slow)."""
        def dead() -> str | None:
            gone = [p.args for p in self._procs if p.poll() is not None]
            return f"worker process exited before registering: {gone[0]}" if gone else None

        self.wait_for_workers(len(self._procs), dead, timeout_s)

    def wait_for_workers(self, count: int, dead: Callable[[], str | None], timeout_s: float) -> None:
        """Block until ``count`` workers have registered; ``dead()`` names a worker that is gone (RuntimeError)."""
        deadline = time.monotonic() + timeout_s
        while self._dispatcher._num_workers() < count:  # noqa: SLF001  tf's own test helper
            if time.monotonic() > deadline:
                raise RuntimeError(f"only {self._dispatcher._num_workers()} of {count} workers registered")  # noqa: SLF001
            reason = dead()
            if reason:
                raise RuntimeError(reason)
            time.sleep(0.2)

    def kill_worker(self, index: int) -> None:
        """Kill one worker process outright (SIGKILL), as a lost node."""
        self._procs[index].kill()
        self._procs[index].wait()

    def close(self) -> None:
        for p in self._procs:
            if p.poll() is None:
                p.kill()
                p.wait()
        self._procs.clear()
        if self._dispatcher is not None:
            self._dispatcher._stop()  # noqa: SLF001
            self._dispatcher = None
        if self._tmp is not None:
            self._tmp.cleanup()
            self._tmp = None


@dataclass(frozen=True)
class RemoteService:
    """A dispatcher that runs elsewhere (e.g. ``10.0.1.5:5050`` on the trainer node)."""

    address: str

    @property
    def target(self) -> str:
        return self.address if "://" in self.address else f"grpc://{self.address}"


def start_worker(dispatcher: str, cpus: Sequence[int] | None, port: int | None = None,
                 worker_address: str | None = None) -> subprocess.Popen:
    """One worker process (``python -m ingestion.cluster.worker``) on ``cpus``; it ends with this process."""
    port = port or _free_port()
    cmd = [sys.executable, "-m", "ingestion.cluster.worker", "--dispatcher", dispatcher, "--port", str(port),
           "--exit-with-parent"]
    if cpus:
        cmd += ["--cpus", ",".join(str(c) for c in cpus)]
    if worker_address:
        cmd += ["--worker-address", worker_address]
    env = {**os.environ, "TF_CPP_MIN_LOG_LEVEL": "2", "PYTHONPATH": os.pathsep.join(
        [str(Path(__file__).resolve().parents[2]), os.environ.get("PYTHONPATH", "")]).rstrip(os.pathsep)}
    return subprocess.Popen(cmd, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)


@dataclass
class ReadResult:
    rows: int
    elements: int
    seconds: float
    values: list[Any] = field(default_factory=list)
    ended_by: str = "end of epoch"
    window_rows: tuple[int, ...] = ()  # rows in each of ``windows`` equal parts of the window

    @property
    def rows_per_s(self) -> float:
        return self.rows / self.seconds if self.seconds > 0 else 0.0

    def window_rates(self) -> list[float]:
        """Rows/s in each part of the window (empty unless read with ``windows`` > 1 for a full window)."""
        if len(self.window_rows) < 2 or self.seconds <= 0:
            return []
        part = self.seconds / len(self.window_rows)
        return [r / part for r in self.window_rows]


def _rows(element: Any) -> int:
    import tensorflow as tf

    first = tf.nest.flatten(element)[0]
    return int(first.shape[0]) if first.shape.rank else 1


def _elements(ds: Any, out: "queue.Queue[Any]", stop: Any, wrap: Callable[[Any], Any] = lambda e: e) -> None:
    """Iterate ``ds`` into ``out`` until the end or ``stop`` is set (a background thread); each element
    goes in as ``wrap(element)``, and ``wrap(None)`` marks the end."""
    try:
        for element in ds:
            while not stop.is_set():
                try:
                    out.put(wrap(element), timeout=0.2)
                    break
                except queue.Full:
                    continue
            if stop.is_set():
                return
    except Exception:  # noqa: BLE001  the service went away after the reader stopped reading
        if not stop.is_set():
            raise
    finally:
        if not stop.is_set():
            out.put(wrap(None))


def _distributed(dataset: Any, service: Any, job_name: str) -> Any:
    """``dataset`` read through ``service`` as one distributed epoch (each split to one worker)."""
    import tensorflow as tf

    return dataset.apply(tf.data.experimental.service.distribute(
        processing_mode="distributed_epoch", service=service.target, job_name=job_name))


#: Batches a trainer's input holds ready ahead of its steps (as ``Dataset.prefetch`` does in a training loop).
PREFETCH_BATCHES = 4


@dataclass(frozen=True)
class Source:
    """A dataset a trainer reads through a service, under the service's job name ``job_name``."""

    dataset: Any
    service: Any
    job_name: str


class Feed:
    """A trainer's input: the batches of one or more datasets (``sources``, by name), each read
    through its service as :func:`read` does (a thread each), converted to NumPy and queued
    together, at most ``depth`` ahead of the trainer. :meth:`next` gives (source name, batch), or
    None once every source ended or none gave a batch for ``idle_timeout_s``."""

    def __init__(self, sources: Mapping[str, Source], depth: int = PREFETCH_BATCHES, idle_timeout_s: float = 15.0):
        import threading

        self.sources, self.idle_timeout_s = sources, idle_timeout_s
        self._queue: queue.Queue[Any] = queue.Queue(maxsize=depth)
        self._stop = threading.Event()
        self._open = len(sources)

    def __enter__(self) -> "Feed":
        import threading

        for name, source in self.sources.items():
            ds = _distributed(source.dataset, source.service, source.job_name)
            threading.Thread(target=_elements, args=(ds, self._queue, self._stop,
                                                     lambda e, name=name: (name, None if e is None else _numpy(e))),
                             daemon=True).start()
        return self

    def __exit__(self, *exc: Any) -> None:
        self._stop.set()

    def next(self) -> tuple[str, Any] | None:
        while self._open:
            try:
                name, batch = self._queue.get(timeout=self.idle_timeout_s)
            except queue.Empty:
                return None
            if batch is not None:
                return name, batch
            self._open -= 1
        return None


def _numpy(element: Any) -> Any:
    import tensorflow as tf

    return tf.nest.map_structure(lambda t: t.numpy(), element)


def read(dataset: Any, service: Any, job_name: str, *, seconds: float | None = None, warmup_s: float = 0.0,
         idle_timeout_s: float = 15.0, keep: Callable[[Any], Any] | None = None,
         on_element: Callable[[int], None] | None = None, pace_rows_per_s: float | None = None,
         windows: int = 1) -> ReadResult:
    """Read ``dataset`` through the service (distributed epoch) and count rows (keeping ``keep(element)``
    of each, e.g. row ids) until the epoch ends, ``seconds`` pass after ``warmup_s``, or no element
    arrives for ``idle_timeout_s``. With ``pace_rows_per_s`` the reader takes rows no faster than
    that after the warm-up, as a trainer that consumes that many rows/s does, so the result is what
    the trainer is delivered (at most the pace). The last matters after a worker is lost: the job goes on on the
    other workers, but TensorFlow (2.21, observed) does not signal the end of the epoch while the
    lost worker's task is still listed, so the reader stops once the remaining workers fall silent
    (``ReadResult.ended_by`` says which). With ``windows`` > 1 and ``seconds``, the rows of each of
    ``windows`` equal parts of the window are counted too (``ReadResult.window_rates``): repeated
    readings of one run, whose spread says how much a single reading varies."""
    import threading

    ds = _distributed(dataset, service, job_name)
    elements_q: queue.Queue[Any] = queue.Queue(maxsize=64)
    stop = threading.Event()
    threading.Thread(target=_elements, args=(ds, elements_q, stop), daemon=True).start()
    rows = elements = 0
    parts = [0] * max(1, windows)
    values: list[Any] = []
    ended_by = "end of epoch"
    started = time.monotonic()
    window_start: float | None = None if warmup_s > 0 else started
    last = started
    while True:
        try:
            element = elements_q.get(timeout=idle_timeout_s)
        except queue.Empty:
            ended_by = f"no element for {idle_timeout_s:g} s"
            break
        if element is None:
            break
        now = last = time.monotonic()
        if window_start is None and now - started >= warmup_s:
            window_start = now
        if window_start is None:
            continue
        n = _rows(element)
        rows += n
        if seconds:
            parts[min(len(parts) - 1, int((now - window_start) / seconds * len(parts)))] += n
        elements += 1
        if keep is not None:
            values.append(keep(element))
        if on_element is not None:
            on_element(elements)
        if pace_rows_per_s:
            time.sleep(max(0.0, window_start + rows / pace_rows_per_s - now))
            last = time.monotonic()
        if seconds is not None and now - window_start >= seconds:
            ended_by = "window"
            break
    stop.set()
    full = ended_by == "window" and windows > 1
    return ReadResult(rows, elements, last - (window_start or last), values, ended_by, tuple(parts) if full else ())
