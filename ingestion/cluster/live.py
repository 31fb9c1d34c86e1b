"""Run an assignment on nodes: one tf.data service per job, its workers on the nodes it was given.

The nodes are one interface (:class:`Nodes`) with two implementations: :class:`LocalNodes`, where
a node is a set of CPUs of this machine and a worker is a process pinned to them, and
:class:`~ingestion.cluster.agent.AgentNodes`, where a node is a machine running the node agent
(``trainwise ingest node-agent``) and a worker is started there on request. A job's units are
placed on the nodes first-fit decreasing (:func:`place`: whole nodes first, then halves two to a
node). Each job gets its own dispatcher in this process
(:class:`~ingestion.cluster.service.LocalService`, no workers of its own) and one worker per unit,
pinned to its node's CPUs; two halves of one node are two workers (of two jobs, or of one) on the
same CPUs, which the operating system time-shares. Every worker of a job runs the job's one
dataset graph (the service sends the same graph to all of them).

:func:`run_on_nodes` reads every job at once, twice, where its trainer reads
(:func:`~ingestion.cluster.service.read`, one thread per job in this process):

1. **capacity**: every job as fast as its workers deliver (what the cluster model calls supply),
   counted in ``CAPACITY_WINDOWS`` equal parts of the window, whose spread is reported;
2. **delivered**: every job at its demand, as a trainer consuming that many rows/s does; a job
   whose workers cannot keep up gets what they deliver. A job given a trainer (a step function,
   ``ingestion.cluster.trainer``) is read by that trainer instead, at the same time: it trains on
   the batches of all of its datasets (:class:`~ingestion.cluster.service.Feed`, prefetched) as
   fast as it steps, and its steps/s, rows/s and input-wait share are measured
   (:class:`~ingestion.cluster.trainer.TrainerReading`).

All figures are measured, on machines that other processes may share.
"""
from __future__ import annotations

import subprocess
import threading
from dataclasses import dataclass
from typing import Any, Callable, Mapping, Protocol, Sequence, TypeVar

from core.errors import UserError
from core.json_edge import JsonObject
from ingestion.cluster.service import Feed, LocalService, ReadResult, Source, read, start_worker
from ingestion.cluster.trainer import Step, TrainerReading, train_on

WARMUP_S = 2.0
READY_TIMEOUT_S = 180.0
#: The capacity window is read as this many equal parts: repeated readings whose spread is reported.
CAPACITY_WINDOWS = 3
T = TypeVar("T")


@dataclass(frozen=True)
class Placement:
    """One unit of ``job``: the share ``share`` of local node ``node``."""

    job: str
    node: int
    share: float


@dataclass(frozen=True)
class JobReading:
    """A job's measured rows/s: as fast as it goes (``capacity``) and at its demand (``delivered``);
    ``capacity_windows`` the capacity in each part of the window (repeated readings). A job whose
    trainer ran (``trainer``) was delivered what that trainer took."""

    capacity_rows_per_s: float
    delivered_rows_per_s: float
    capacity_windows: tuple[float, ...] = ()
    trainer: TrainerReading | None = None

    @property
    def capacity_spread(self) -> float | None:
        """The relative standard deviation of the capacity over its windows (None with fewer than two)."""
        w = self.capacity_windows
        if len(w) < 2 or sum(w) <= 0:
            return None
        mean = sum(w) / len(w)
        return (sum((x - mean) ** 2 for x in w) / (len(w) - 1)) ** 0.5 / mean


def place(shares_by_job: Mapping[str, Sequence[float]], nodes: int) -> list[Placement]:
    """First-fit decreasing of every job's unit shares into ``nodes`` nodes of capacity 1."""
    free = [1.0] * nodes
    items = sorted(((share, job) for job, shares in shares_by_job.items() for share in shares),
                   key=lambda item: -item[0])
    out = []
    for share, job in items:
        node = next((i for i in range(nodes) if free[i] >= share - 1e-9), None)
        if node is None:
            raise ValueError(f"the units {dict(shares_by_job)} do not fit on {nodes} nodes")
        free[node] -= share
        out.append(Placement(job, node, share))
    return out


def _in_threads(tasks: Mapping[str, Callable[[], T]]) -> dict[str, T]:
    """Run every task at once, a thread each; their results by name (the first error is re-raised here)."""
    out: dict[str, T] = {}
    errors: list[BaseException] = []

    def one(name: str) -> None:
        try:
            out[name] = tasks[name]()
        except Exception as exc:  # noqa: BLE001  re-raised below, in the caller's thread
            errors.append(exc)

    threads = [threading.Thread(target=one, args=(name,)) for name in tasks]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    if errors:
        raise errors[0]
    return out


def _read_all(datasets: Mapping[str, Any], services: Mapping[str, LocalService], phase: str, seconds: float,
              pace: Mapping[str, float] | None, windows: int = 1) -> dict[str, ReadResult]:
    """Read every job at once (a thread each); the :class:`~ingestion.cluster.service.ReadResult` per job."""
    def one(job: str) -> Callable[[], ReadResult]:
        return lambda: read(datasets[job], services[job], f"{job}-{phase}", seconds=seconds, warmup_s=WARMUP_S,
                            pace_rows_per_s=pace[job] if pace else None, windows=windows)

    return _in_threads({job: one(job) for job in services})


def _train_all(sources: Mapping[str, Mapping[str, Source]], trainers: Mapping[str, Step],
               seconds: float) -> dict[str, TrainerReading]:
    """Every job's trainer at once (a thread each), each training on all of its job's datasets that
    run (``sources``, per job; a :class:`~ingestion.cluster.service.Feed`); the :class:`TrainerReading` per job."""
    def one(job: str) -> Callable[[], TrainerReading]:
        def train() -> TrainerReading:
            if not sources.get(job):
                return TrainerReading(0, 0, 0.0, 0.0)  # no unit: the trainer gets nothing
            with Feed(sources[job]) as feed:
                return train_on(feed.next, trainers[job], seconds=seconds, warmup_s=WARMUP_S, name=job)
        return train

    return _in_threads({job: one(job) for job in trainers})


class Worker(Protocol):
    """A started worker of one job on one node."""

    def gone(self) -> str | None:
        """Why the worker is no longer running (None while it runs)."""

    def stop(self) -> None: ...


class Nodes(Protocol):
    """Where a plan's units run: ``count`` nodes, each starting a job's workers on request."""

    count: int

    def dispatcher_port(self) -> int:
        """The port a job's dispatcher listens on (0: any free port)."""

    def start_worker(self, node: int, dispatcher_port: int) -> Worker:
        """Start a worker on ``node`` that registers with the dispatcher on this machine's ``dispatcher_port``."""

    def describe(self) -> JsonObject: ...


@dataclass
class _Process:
    """A worker process of this machine."""

    proc: subprocess.Popen

    def gone(self) -> str | None:
        return f"worker process exited before registering: {self.proc.args}" if self.proc.poll() is not None else None

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()


@dataclass(frozen=True)
class LocalNodes:
    """Nodes of this machine: node ``i`` is a worker process pinned to the CPUs ``cpus[i]``."""

    cpus: tuple[tuple[int, ...], ...]

    @property
    def count(self) -> int:
        return len(self.cpus)

    def dispatcher_port(self) -> int:
        return 0

    def start_worker(self, node: int, dispatcher_port: int) -> Worker:
        return _Process(start_worker(f"localhost:{dispatcher_port}", self.cpus[node]))

    def describe(self) -> JsonObject:
        return {"kind": "local", "count": self.count, "cpus": [list(c) for c in self.cpus]}


@dataclass
class _Job:
    """A running job: its dispatcher and its workers."""

    service: LocalService
    workers: list[Worker]

    def wait_ready(self, timeout_s: float) -> None:
        def gone() -> str | None:
            return next((r for r in (w.gone() for w in self.workers) if r), None)

        self.service.wait_for_workers(len(self.workers), gone, timeout_s)

    def close(self) -> None:
        for worker in self.workers:
            worker.stop()
        self.service.close()


def _start(placements: Sequence[Placement], nodes: Nodes, jobs: dict[str, _Job]) -> None:
    """Start one dispatcher per placed job and its workers on their nodes, into ``jobs`` (the caller closes them)."""
    for p in placements:
        if p.job not in jobs:
            jobs[p.job] = _Job(LocalService(workers=[], port=nodes.dispatcher_port()), [])
            jobs[p.job].service.start()
        jobs[p.job].workers.append(nodes.start_worker(p.node, jobs[p.job].service.bound_port))


def paces(capacity: Mapping[str, float], demand: Mapping[str, float], owner: Mapping[str, str]) -> dict[str, float]:
    """The rows/s a trainer asks of each dataset: its job's demand split over the job's datasets in
    proportion to their measured capacity (equally when none delivered)."""
    total: dict[str, float] = {}
    count: dict[str, int] = {}
    for name, job in owner.items():
        total[job] = total.get(job, 0.0) + capacity.get(name, 0.0)
        count[job] = count.get(job, 0) + 1
    return {name: demand[job] * (capacity.get(name, 0.0) / total[job] if total[job] > 0 else 1.0 / count[job])
            for name, job in owner.items()}


def run_on_nodes(datasets: Mapping[str, Any], placements: Sequence[Placement], nodes: Nodes,
                 demand: Mapping[str, float], *, seconds: float, owner: Mapping[str, str] | None = None,
                 trainers: Mapping[str, Step] | None = None, windows: int = CAPACITY_WINDOWS,
                 ready_timeout_s: float = READY_TIMEOUT_S) -> dict[str, JobReading]:
    """Start each placed dataset's dispatcher and workers, read capacity then delivered rows/s, stop
    them. ``owner`` maps datasets to the job whose trainer reads them (default: each its own job,
    keyed as in ``demand``); the trainer paces a job's datasets by :func:`paces`. A job in
    ``trainers`` (its step function) is read by its trainer instead, training on all of its datasets
    at once as fast as it steps: a dataset's delivered rows/s are the rows the trainer took from it
    over the trainer's window, and its reading carries the trainer's (:class:`TrainerReading`).
    Datasets without a placement read nothing (0 rows/s)."""
    owner = owner or {name: name for name in datasets}
    trainers = trainers or {}
    jobs: dict[str, _Job] = {}
    try:
        _start(placements, nodes, jobs)
        for job in jobs.values():
            try:
                job.wait_ready(ready_timeout_s)
            except RuntimeError as exc:
                raise UserError(f"tf.data service workers are not reachable: {exc}") from None
        services = {name: job.service for name, job in jobs.items()}
        capacity = {j: r for j, r in _read_all(datasets, services, "capacity", seconds, None, windows).items()}
        rates = {j: r.rows_per_s for j, r in capacity.items()}
        paced = {name: s for name, s in services.items() if owner[name] not in trainers}
        pace = paces(rates, demand, {name: owner[name] for name in paced})
        sources = {job: {name: Source(datasets[name], s, f"{name}-trainer") for name, s in services.items()
                         if owner[name] == job} for job in trainers}
        read_paced: dict[str, ReadResult] = {}
        trained: dict[str, TrainerReading] = {}
        _in_threads({"paced": lambda: read_paced.update(_read_all(datasets, paced, "trainer", seconds, pace)),
                     "trainers": lambda: trained.update(_train_all(sources, trainers, seconds))})  # at the same time
    finally:
        for job in jobs.values():
            job.close()
    delivered = {j: r.rows_per_s for j, r in read_paced.items()}
    for name, job in owner.items():
        if job in trained and trained[job].seconds > 0:
            delivered[name] = dict(trained[job].rows_by_source).get(name, 0) / trained[job].seconds
    return {name: JobReading(rates.get(name, 0.0), delivered.get(name, 0.0),
                             tuple(capacity[name].window_rates()) if name in capacity else (), trained.get(owner[name]))
            for name in datasets}
