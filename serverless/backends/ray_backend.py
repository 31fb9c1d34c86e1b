"""The Ray backend: each rollout is a Ray task running the same ``handler``.

``RayBackend()`` starts Ray locally (``ray.init()``); ``RayBackend(address=...)``
joins an existing cluster. Ray worker processes keep the handler module loaded, so
warm env state survives between tasks that land on the same worker (Ray chooses
the worker; a task on a new worker is a cold start, reported by the handler).

Figures: ``wall_s`` and ``lambda_s`` are both the measured wall time of the batch
(label "measured": nothing is modelled), and each billing record is the handler's
own measured duration rounded up to 1 ms, priced as if it had run on Lambda at the
requested memory size (the ledger says "modelled from price table"). Memory size
does not limit a Ray task's CPU; it only prices it.

Ray is an optional part of the install (the ``ray`` extra); without it this backend says which
extra to install, and the other backends work as before.

Every task runs in a ``runtime_env`` (:func:`rollout_runtime_env`) whose PYTHONPATH holds
the project and the user's directories on the driver's path, so a ``module:EnvId`` env's
module imports in Ray's worker processes as it does in the driver.
"""

from __future__ import annotations

import os
import time
from pathlib import Path
from typing import Any

from core.errors import UserError
from serverless.invocation import BillingRecord, Invocation, InvokeBatch
from serverless.invocation import check_memory_mb
from serverless.pricing import billed_ms

_PROJECT_ROOT = str(Path(__file__).resolve().parents[2])


def rollout_runtime_env() -> dict[str, Any]:
    """The rollout tasks' Ray ``runtime_env``: PYTHONPATH = the project, then the user's
    directories on this process's path (:func:`serverless.envs.user_import_paths`)."""
    from serverless.envs import user_import_paths

    paths = [_PROJECT_ROOT, *(p for p in user_import_paths() if p != _PROJECT_ROOT)]
    return {"env_vars": {"PYTHONPATH": os.pathsep.join(paths)}}


def _rollout_task(event: dict[str, Any]) -> dict[str, Any]:
    from serverless.handler import handler

    try:
        return {"ok": True, "result": handler(event, None)}
    except Exception as exc:  # reported per invocation
        return {"ok": False, "error": f"{type(exc).__name__}: {exc}"}


class RayBackend:
    name = "ray"

    def __init__(self, address: str | None = None) -> None:
        try:
            import ray
        except ImportError:
            raise UserError("the ray backend needs Ray: pip install 'trainwise[ray]' (or use the local or lambda "
                            "backend)") from None

        if not ray.is_initialized():
            if address:
                ray.init(address=address, ignore_reinit_error=True, log_to_driver=False)
            else:
                ray.init(ignore_reinit_error=True, log_to_driver=False, include_dashboard=False)
        self._ray = ray
        self._task = ray.remote(num_cpus=1, max_retries=0, runtime_env=rollout_runtime_env())(_rollout_task)

    def invoke(self, events: list[dict[str, Any]], memory_mb: int, concurrency: int | None = None) -> InvokeBatch:
        check_memory_mb(memory_mb)
        if not events:  # as on the other backends: nothing to run, no invocations
            return InvokeBatch([], 0.0, 0.0, "measured", concurrency or 0)
        ray = self._ray
        concurrency = len(events) if concurrency is None else int(concurrency)
        if concurrency < 1:
            raise ValueError(f"concurrency must be >= 1, got {concurrency}")
        t0 = time.perf_counter()
        replies: list[dict[str, Any]] = [{} for _ in events]
        pending: dict[Any, int] = {}
        next_index = 0
        while next_index < len(events) or pending:
            while next_index < len(events) and len(pending) < concurrency:
                pending[self._task.remote(events[next_index])] = next_index
                next_index += 1
            done, _ = ray.wait(list(pending), num_returns=1)
            for ref in done:
                index = pending.pop(ref)
                try:
                    replies[index] = ray.get(ref)
                except Exception as exc:  # task or worker failure
                    replies[index] = {"ok": False, "error": f"{type(exc).__name__}: {exc}"}
        wall_s = time.perf_counter() - t0
        invocations = []
        for reply in replies:
            if reply.get("ok"):
                result = reply["result"]
                t = result["timings"]
                billing = BillingRecord(
                    billed_ms=billed_ms(t["total_ms"]),
                    duration_ms=t["total_ms"],
                    init_ms=t["init_ms"] if result.get("cold_start") else 0.0,
                    memory_mb=memory_mb,
                    cold_start=bool(result.get("cold_start")),
                    label="measured",
                )
                invocations.append(Invocation(result, billing))
            else:
                invocations.append(
                    Invocation(None, BillingRecord(0, 0.0, 0.0, memory_mb, error=str(reply.get("error")), label="measured"))
                )
        notes = []
        cpus = int(ray.cluster_resources().get("CPU", 0))
        if concurrency > cpus:
            notes.append(f"asked concurrency {concurrency} exceeds the Ray cluster's {cpus} CPUs; tasks queue")
        return InvokeBatch(invocations, wall_s, wall_s, "measured", concurrency, notes)

    def close(self) -> None:
        """Disconnect from Ray (a local instance we started stops; a joined cluster keeps running)."""
        if self._ray.is_initialized():
            self._ray.shutdown()
