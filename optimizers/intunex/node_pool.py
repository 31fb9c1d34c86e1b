"""The node level on several cores: the tunings a planning table lacks, in forked processes.

Each node-level tuning (one job's pipeline on one unit shape) is independent of the others and
deterministic, so the table comes out the same whichever process tunes it. The parent forks
``processes`` workers after it has loaded the node-level agent; each inherits the cluster model
and is sent only indices (job, unit, method), and sends back the choice as plain values (the
configuration's knob names and integers, the rows/s, the source, the evaluation count), which the
parent stores in the table's memo in the order the serial loop would have.

Forking needs the ``fork`` start method (Linux; elsewhere, or with one process, the table is filled
serially). The parent should hold no lock another thread may be using (the planner forks before
any thread of its own starts).
"""

from __future__ import annotations

import multiprocessing as mp
from concurrent.futures import ProcessPoolExecutor
from typing import Any, Protocol

from ingestion.cluster.model import ClusterModel, JobModel, Unit

#: What a worker sends back: None (the pipeline cannot run on the unit) or the choice's values
#: (configuration, rows/s, source, evaluations).
Sent = tuple[dict[str, int], float, str, int] | None


class Table(Protocol):
    """What the pool needs of :class:`optimizers.intunex.node_agent.NodeTable`."""

    cluster: ClusterModel
    agent: Any

    def key(self, job: JobModel, unit: Unit, method: str) -> tuple: ...

    def known(self, key: tuple) -> bool: ...

    def choice(self, job: JobModel, unit: Unit, method: str = "intunex") -> Any: ...


#: The table and units the forked workers read (set in the parent just before it forks).
_SHARED: tuple[Table, list[Unit]] | None = None

#: Fewer missing tunings than this are done in the parent (forking costs more than they take).
MIN_TUNINGS = 8


def can_fork() -> bool:
    return "fork" in mp.get_all_start_methods()


def _tune(task: tuple[int, int, str]) -> Sent:
    assert _SHARED is not None, "node_pool worker started without a table"
    table, units = _SHARED
    j, u, method = task
    choice = table.choice(table.cluster.jobs[j], units[u], method)
    if choice is None:
        return None
    return {str(k): int(v) for k, v in choice.config.items()}, float(choice.rows_per_s), str(choice.source), \
        int(choice.evaluations)


def tune_parallel(table: Table, units: list[Unit], method: str, processes: int) -> dict[tuple, Sent]:
    """Tune what ``table`` lacks for every job on every unit of ``units`` with ``method``, in
    ``processes`` forked workers: the choices by memo key, in the serial loop's order. Empty (the
    table's own loop tunes) with one process, without ``fork``, or with few tunings missing."""
    global _SHARED
    missing: dict[tuple, tuple[int, int, str]] = {}  # in the serial loop's order
    for j, job in enumerate(table.cluster.jobs):
        for u, unit in enumerate(units):
            key = table.key(job, unit, method)
            if not table.known(key) and key not in missing:
                missing[key] = (j, u, method)
    keys, tasks = list(missing), list(missing.values())
    if processes <= 1 or len(tasks) < MIN_TUNINGS or not can_fork():
        return {}
    if method == "intunex" and table.agent is None:
        from optimizers.intunex.policies import node_agent

        table.agent = node_agent()  # loaded once, before the fork, so every worker shares it
    _SHARED = (table, units)
    try:
        with ProcessPoolExecutor(min(processes, len(tasks)), mp_context=mp.get_context("fork")) as pool:
            sent = list(pool.map(_tune, tasks, chunksize=max(1, len(tasks) // (8 * processes))))
    finally:
        _SHARED = None
    return dict(zip(keys, sent))
