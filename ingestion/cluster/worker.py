"""One tf.data service worker (one node of the ingestion pool) as a process of its own.

    python -m ingestion.cluster.worker --dispatcher HOST:PORT --port 5051 [--cpus 0,1] [--worker-address IP:5051]

``--cpus`` pins the process to those CPUs (``os.sched_setaffinity``) and sizes TensorFlow's
thread pools to them, before TensorFlow is imported: the worker's CPU share is the node's vCPUs.
On an EC2 node, ``--worker-address`` is the node's private address the dispatcher and trainers reach.
"""

from __future__ import annotations

import argparse
import os
import threading
import time


def _exit_with_parent(parent: int) -> None:
    """End this worker when the process that started it is gone (no orphaned workers)."""
    while os.getppid() == parent:
        time.sleep(1.0)
    os._exit(0)


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--dispatcher", required=True, help="dispatcher address HOST:PORT")
    p.add_argument("--port", type=int, required=True)
    p.add_argument("--cpus", default=None, help="comma-separated CPU ids this worker may use")
    p.add_argument("--worker-address", default=None, help="address others reach this worker at (default localhost:PORT)")
    p.add_argument("--exit-with-parent", action="store_true", help="stop when the starting process ends (loopback runs)")
    args = p.parse_args(argv)
    if args.exit_with_parent:
        threading.Thread(target=_exit_with_parent, args=(os.getppid(),), daemon=True).start()
    if args.cpus:
        cpus = {int(c) for c in args.cpus.split(",")}
        os.sched_setaffinity(0, cpus)
        os.environ.setdefault("OMP_NUM_THREADS", str(len(cpus)))
    import tensorflow as tf

    if args.cpus:
        tf.config.threading.set_intra_op_parallelism_threads(len(cpus))
        tf.config.threading.set_inter_op_parallelism_threads(len(cpus))
    config = tf.data.experimental.service.WorkerConfig(
        dispatcher_address=args.dispatcher, worker_address=args.worker_address or f"localhost:{args.port}",
        port=args.port, heartbeat_interval_ms=200)
    tf.data.experimental.service.WorkerServer(config).join()


if __name__ == "__main__":
    main()
