"""Run an assignment on local nodes: one tf.data service per job, its workers on the nodes it was given.

A *local node* is one CPU of this machine. A job's units are placed on the nodes first-fit
decreasing (:func:`place`: whole nodes first, then halves two to a node). Each job gets its own
dispatcher (:class:`~ingestion.cluster.service.LocalService`) and one worker process per unit,
pinned to its node's CPU; two halves of one node are two worker processes (of two jobs, or of one)
on the same CPU, which the operating system time-shares. Every worker of a job runs the job's one
dataset graph (the service sends the same graph to all of them).

:func:`run_on_local_nodes` reads every job at once, twice, where its trainer reads
(:func:`~ingestion.cluster.service.read`, one thread per job in this process):

1. **capacity**: every job as fast as its workers deliver (what the cluster model calls supply);
2. **delivered**: every job at its demand, as a trainer consuming that many rows/s does; a job
   whose workers cannot keep up gets what they deliver.

Both figures are measured rows/s on this machine, which other processes may share.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass
from typing import Any, Mapping, Sequence

from core.errors import UserError
from ingestion.cluster.service import LocalService, read

WARMUP_S = 2.0
READY_TIMEOUT_S = 180.0


@dataclass(frozen=True)
class Placement:
    """One unit of ``job``: the share ``share`` of local node ``node``."""

    job: str
    node: int
    share: float


@dataclass(frozen=True)
class JobReading:
    """A job's measured rows/s: as fast as it goes (``capacity``) and at its demand (``delivered``)."""

    capacity_rows_per_s: float
    delivered_rows_per_s: float


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


def _read_all(datasets: Mapping[str, Any], services: Mapping[str, LocalService], phase: str, seconds: float,
              pace: Mapping[str, float] | None) -> dict[str, float]:
    """Read every job at once (a thread each); rows/s per job."""
    out: dict[str, float] = {}
    errors: list[BaseException] = []

    def one(job: str) -> None:
        try:
            r = read(datasets[job], services[job], f"{job}-{phase}", seconds=seconds, warmup_s=WARMUP_S,
                     pace_rows_per_s=pace[job] if pace else None)
            out[job] = r.rows_per_s
        except Exception as exc:  # noqa: BLE001  re-raised below, in the caller's thread
            errors.append(exc)

    threads = [threading.Thread(target=one, args=(job,)) for job in services]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    if errors:
        raise errors[0]
    return out


def _start(placements: Sequence[Placement], node_cpus: Sequence[Sequence[int]],
           services: dict[str, LocalService]) -> None:
    """Start one service per placed job into ``services`` (so the caller closes what started)."""
    cpus_by_job: dict[str, list[list[int]]] = {}
    for p in placements:
        cpus_by_job.setdefault(p.job, []).append(list(node_cpus[p.node]))
    for job, cpus in cpus_by_job.items():
        services[job] = LocalService(workers=cpus)
        services[job].start()


def run_on_local_nodes(datasets: Mapping[str, Any], placements: Sequence[Placement],
                       node_cpus: Sequence[Sequence[int]], demand: Mapping[str, float], *,
                       seconds: float, ready_timeout_s: float = READY_TIMEOUT_S) -> dict[str, JobReading]:
    """Start each placed job's service and workers, read capacity then delivered rows/s, stop them.
    Jobs of ``datasets`` without a placement read nothing (0 rows/s)."""
    services: dict[str, LocalService] = {}
    try:
        _start(placements, node_cpus, services)
        for service in services.values():
            try:
                service.wait_ready(ready_timeout_s)
            except RuntimeError as exc:
                raise UserError(f"local tf.data service workers are not reachable: {exc}") from None
        capacity = _read_all(datasets, services, "capacity", seconds, None)
        delivered = _read_all(datasets, services, "trainer", seconds, demand)
    finally:
        for service in services.values():
            service.close()
    return {job: JobReading(capacity.get(job, 0.0), delivered.get(job, 0.0)) for job in datasets}
