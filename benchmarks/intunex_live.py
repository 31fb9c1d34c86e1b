"""InTuneX's live smoke run: the real DLRM pipeline through a loopback tf.data service (measured).

    python -m benchmarks.intunex --live --workers 2 --json-out benchmarks/results/intunex-live-2026-12-02.json

1. Synthetic Criteo rows (TSV) and the DLRM pipeline for a 1-vCPU node; the single-node
   simulator is calibrated on it (``ingestion.calibrate``, cached).
2. The node-level agent picks the pipeline's configuration for a 1-vCPU worker on that model;
   the static configuration is tf.data AUTOTUNE's.
3. A dispatcher (fault-tolerant mode) and one worker process pinned to CPU 0: the tuned
   configuration is read through the service; measured over the model's prediction gives the
   per-worker efficiency of this run (the service's overhead and the calibration's level together).
4. More workers join (one per CPU, round robin), and the static and the tuned configurations are
   read side by side in the same run, alternating; the cluster model predicts each (workers x
   simulated rows x efficiency) and its error against the measured rows/s is reported.

Everything here is measured on this machine (shared, so expect noise); prices are modelled
(a worker stands for half a c7i.large).
"""

from __future__ import annotations

import os
import tempfile
import time
from typing import Any

from benchmarks._common import print_table, progress
from ingestion.cluster.instances import by_name


def _dataset(spec: Any, config: dict[str, int]) -> Any:
    return spec.build(config).repeat()


def live(workers: int = 2, seconds: float = 8.0, rows: int = 40_000) -> dict[str, Any]:
    from ingestion.calibrate import calibrate
    from ingestion.cluster.service import LocalService, read, start_worker
    from ingestion.datagen import generate
    from ingestion.dlrm import dlrm_spec
    from ingestion.node import Node
    from ingestion.simulator import simulate
    from optimizers.baselines.autotune import autotune_config
    from optimizers.intunex.node_agent import autotune_node, tune_node
    from optimizers.intunex.policies import node_agent

    workers = max(2, min(4, workers))
    data = tempfile.mkdtemp(prefix="tw-intunex-live-")
    generate(rows, "tsv", data, shards=8)
    node = Node("worker-1vcpu", 1, 2.0)
    spec = dlrm_spec(data, "tsv", node, (1024,))
    progress("calibrating the 1-vCPU pipeline model (cached after the first run)")
    cal = calibrate(spec, node, time_budget_s=90, window_s=0.5)
    tuned = tune_node(node_agent(), cal.model, spec.space, node).config
    static = autotune_config(spec)
    # the static prediction takes the AUTOTUNE model's configuration (the run uses tf.data's own AUTOTUNE)
    sim = {"tuned": simulate(cal.model, tuned, node).rows_per_s,
           "static": autotune_node(cal.model, spec.space, node).rows_per_s}
    cpus = sorted(os.sched_getaffinity(0))
    price = by_name("c7i.large").usd_per_hour / 2
    out: dict[str, Any] = {"label": "measured", "workers": workers, "window_s": seconds, "configs": {"tuned": tuned, "static": static},
                           "simulated_per_worker": sim, "calibration_fit_error": cal.fit_error}
    with LocalService(workers=[[cpus[0]]]) as service:
        service.wait_ready()
        progress("one worker: the service's per-worker efficiency")
        one = read(_dataset(spec, tuned), service, "efficiency", seconds=seconds, warmup_s=2.0)
        efficiency = one.rows_per_s / sim["tuned"] if sim["tuned"] > 0 else None
        for i in range(1, workers):
            service._procs.append(start_worker(service.address, [cpus[i % len(cpus)]]))  # noqa: SLF001
        service.wait_ready()
        runs: dict[str, list[float]] = {"static": [], "tuned": []}
        for rnd in range(2):
            for name in (("static", "tuned") if rnd == 0 else ("tuned", "static")):
                progress(f"{workers} workers: {name} (round {rnd + 1})")
                config = tuned if name == "tuned" else static
                r = read(_dataset(spec, config), service, f"{name}-{rnd}", seconds=seconds, warmup_s=2.0)
                runs[name].append(r.rows_per_s)
    rows_out = []
    for name, values in runs.items():
        measured = sum(values) / len(values)
        predicted = workers * sim[name] * efficiency if efficiency else None
        rows_out.append({"assignment": name, "workers": workers, "measured_rows_per_s": measured, "samples": values,
                         "predicted_rows_per_s": predicted,
                         "model_error": abs(predicted - measured) / measured if predicted and measured else None,
                         "usd_per_h": workers * price, "rows_per_usd": measured * 3600 / (workers * price)})
    print_table(["assignment", "workers", "measured rows/s", "predicted rows/s", "model error", "rows per $"],
                [[r["assignment"], r["workers"], r["measured_rows_per_s"], r["predicted_rows_per_s"], r["model_error"],
                  r["rows_per_usd"]] for r in rows_out], digits=3,
                title=f"live loopback tf.data service (measured; {time.strftime('%Y-%m-%d')}; shared machine)")
    out.update(one_worker_rows_per_s=one.rows_per_s, worker_efficiency=efficiency, runs=rows_out,
               loadavg=os.getloadavg())
    return out
