"""The trainer's view: a small DLRM-style trainer reads the DLRM pipeline through the tf.data service (measured).

    python -m benchmarks.intunex_trainer --seconds 15 --json-out benchmarks/results/intunex-trainer-2026-12-04.json

One local node (a tf.data service worker pinned to the first CPU, as ``--local-nodes`` runs it)
runs the ``dlrm-tsv`` pipeline (``ingestion.cluster.pipelines``) with tf.data AUTOTUNE's
configuration, then with the node-level agent's (InTune's agent on the pipeline's calibrated
model for a one-CPU node), alternating, ``--repeats`` times each. The trainer is this process,
pinned to the other CPU: torch on one thread trains a DLRM-style model (26 embedding bags of 16
dimensions sized as the pipeline's hash tables, a bottom MLP on the 13 dense features, a top MLP
over their concatenation; binary cross-entropy, SGD with sparse embedding gradients). Each step
times the wait for its batch (input wait) and the rest (tensors in, forward, backward, update).
Steps/s, rows/s and the share of step time spent waiting for input are measured; the machine is
shared with other processes, so its load is recorded before and after.
"""

from __future__ import annotations

import argparse
import os
import time
from typing import Any

from benchmarks._common import print_table, progress, recording_load, write_result

from ingestion.cluster.trainer import LEARNING_RATE, dlrm_model


def train(dataset: Any, service: Any, job_name: str, seconds: float, warmup_s: float) -> dict[str, float]:
    """Train on ``dataset`` read through ``service`` for ``seconds`` after ``warmup_s``; the step figures."""
    import tensorflow as tf
    import torch

    from ingestion.dlrm import DEFAULT_TABLE_SIZES

    model = dlrm_model(DEFAULT_TABLE_SIZES)
    sgd = torch.optim.SGD(model.parameters(), lr=LEARNING_RATE)
    loss_fn = torch.nn.BCEWithLogitsLoss()
    it = iter(dataset.apply(tf.data.experimental.service.distribute(
        processing_mode="distributed_epoch", service=service.target, job_name=job_name)))
    started = time.monotonic()
    steps = rows = 0
    wait = busy = 0.0
    while True:
        t0 = time.monotonic()
        batch = next(it)
        t1 = time.monotonic()
        x, cat = torch.from_numpy(batch["dense"].numpy()), torch.from_numpy(batch["cat"].numpy())
        loss = loss_fn(model(x, cat), torch.from_numpy(batch["label"].numpy()))
        sgd.zero_grad()
        loss.backward()
        sgd.step()
        t2 = time.monotonic()
        if t0 - started < warmup_s:
            continue
        steps, rows, wait, busy = steps + 1, rows + int(x.shape[0]), wait + t1 - t0, busy + t2 - t1
        if t2 - started >= warmup_s + seconds:
            break
    total = wait + busy
    return {"steps": steps, "steps_per_s": steps / total, "rows_per_s": rows / total, "input_wait_share": wait / total,
            "compute_ms_per_step": 1000 * busy / steps, "wait_ms_per_step": 1000 * wait / steps, "loss": float(loss.detach())}


def trainer_view(seconds: float = 15.0, repeats: int = 2, warmup_s: float = 3.0) -> dict[str, Any]:
    import torch

    from ingestion.cluster.pipelines import real_pipeline
    from ingestion.cluster.service import LocalService
    from optimizers.baselines.autotune import autotune_config
    from optimizers.intunex.node_agent import tune_node
    from optimizers.intunex.policies import node_agent

    cpus = sorted(os.sched_getaffinity(0))
    if len(cpus) < 2:
        raise SystemExit("needs 2 CPUs: one for the worker, one for the trainer")
    progress("the dlrm-tsv pipeline and its calibration (cached after the first run)")
    pipeline = real_pipeline("dlrm-tsv")
    spec = pipeline.spec
    configs = {"autotune": autotune_config(spec),
               "tuned": tune_node(node_agent(), pipeline.calibration.model, spec.space, pipeline.node).config}
    torch.set_num_threads(1)
    runs: dict[str, list[dict[str, float]]] = {name: [] for name in configs}
    with LocalService(workers=[[cpus[0]]]) as service:
        service.wait_ready()
        os.sched_setaffinity(0, {cpus[1]})  # the trainer (and its reader) on the other CPU
        try:
            for r in range(repeats):
                for name in (configs if r % 2 == 0 else reversed(list(configs))):
                    progress(f"training on the {name} pipeline (repeat {r + 1})")
                    ds = spec.build(configs[name]).repeat()
                    runs[name].append(train(ds, service, f"{name}-{r}", seconds, warmup_s))
        finally:
            os.sched_setaffinity(0, set(cpus))
    return {"label": "measured", "configs": configs, "runs": runs, "window_s": seconds, "warmup_s": warmup_s,
            "summary": {name: {k: sum(x[k] for x in rs) / len(rs) for k in ("steps_per_s", "rows_per_s",
                                                                           "input_wait_share", "compute_ms_per_step")}
                        for name, rs in runs.items()}}


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--seconds", type=float, default=15.0, help="measuring window per training run")
    p.add_argument("--repeats", type=int, default=2, help="runs per pipeline configuration, alternating")
    p.add_argument("--json-out", default=None)
    args = p.parse_args(argv)
    payload: dict[str, Any] = {"command": "python -m benchmarks.intunex_trainer " + " ".join(argv or [])}
    with recording_load(payload):
        payload.update(trainer_view(args.seconds, args.repeats))
    print_table(["pipeline", "steps/s", "rows/s", "input-wait share", "compute ms/step"],
                [[name, s["steps_per_s"], s["rows_per_s"], s["input_wait_share"], s["compute_ms_per_step"]]
                 for name, s in payload["summary"].items()], digits=3,
                title="DLRM-style trainer on one local tf.data service worker (measured; shared machine)")
    write_result(args.json_out, payload)


if __name__ == "__main__":
    main()
