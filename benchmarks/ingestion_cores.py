"""How many cores a DLRM pipeline configuration keeps busy: rows/s and CPU seconds per row.

A diagnosis tool for the simulator's structure (not part of any bar): for each configuration it
builds the pipeline in this process, warms up, then times a window and reads the process's CPU
time (user + system, every thread) over the same window, so ``cores = CPU s / wall s``. A stage
that overlaps with another shows as more than one core; a parallel map whose single thread is
serial with its input shows as one core. Measured; run it under the bench lock:

    flock /tmp/trainwise-bench.lock .venv/bin/python -m benchmarks.ingestion_cores --format tfrecord \\
        --configs ",parse_parallelism=1,transform_parallelism=1,parse_parallelism=1:transform_parallelism=1" --repeats 3

A configuration is ``knob=value`` pairs joined by ``:`` (empty = every parallelism 0, i.e.
sequential, other knobs at their defaults); ``upto=STAGE`` times a prefix of the pipeline.
"""

from __future__ import annotations

import argparse
import os
import resource
import time
from typing import Any


def _cpu_s() -> float:
    r = resource.getrusage(resource.RUSAGE_SELF)
    return r.ru_utime + r.ru_stime


def time_cores(ds: Any, window_s: float, warmup_s: float) -> dict[str, float]:
    """Rows/s and cores used over one window after a warm-up."""
    import tensorflow as tf

    it = iter(ds)
    start = time.perf_counter()
    while time.perf_counter() - start < warmup_s:
        next(it)
    rows, cpu0, t0 = 0, _cpu_s(), time.perf_counter()
    while True:
        first = tf.nest.flatten(next(it))[0]
        rows += int(first.shape[0]) if first.shape.rank else 1
        now = time.perf_counter()
        if now - t0 >= window_s:
            break
    wall, cpu = now - t0, _cpu_s() - cpu0
    return {"rows_per_s": rows / wall, "cores": cpu / wall, "cpu_us_per_row": 1e6 * cpu / rows,
            "wall_us_per_row": 1e6 * wall / rows}


def parse_config(text: str) -> tuple[dict[str, int], str | None]:
    """``"parse_parallelism=1:prefetch_buffer=4"`` -> overrides, and ``upto=STAGE`` if given."""
    overrides: dict[str, int] = {}
    upto = None
    for pair in filter(None, text.split(":")):
        key, _, value = pair.partition("=")
        if key == "upto":
            upto = value
        else:
            overrides[key] = int(value)
    return overrides, upto


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--format", default="tfrecord", choices=("tsv", "tfrecord"))
    p.add_argument("--data-root", default=".trainwise/bench-data")
    p.add_argument("--rows", type=int, default=200_000)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--configs", default=",parse_parallelism=1,transform_parallelism=1,"
                                        "parse_parallelism=1:transform_parallelism=1,parse_parallelism=2,"
                                        "transform_parallelism=2")
    p.add_argument("--repeats", type=int, default=1)
    p.add_argument("--window-s", type=float, default=2.5)
    p.add_argument("--warmup-s", type=float, default=0.7)
    args = p.parse_args(argv)
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    from pathlib import Path

    from benchmarks.ingestion import _ensure_data
    from ingestion.calibrate import sequential_config
    from ingestion.dlrm import dlrm_spec
    from ingestion.node import this_machine

    node = this_machine()
    spec = dlrm_spec(str(_ensure_data(Path(args.data_root), args.format, args.rows, args.seed)), args.format, node)
    base = sequential_config(spec.space)
    print("[measured] configuration: rows/s, cores busy, CPU us per row, wall us per row")
    for _ in range(args.repeats):
        for text in args.configs.split(","):
            overrides, upto = parse_config(text)
            config = {**base, **overrides}
            ds = spec.build_upto(config, upto) if upto else spec.build(config)
            r = time_cores(ds, args.window_s, args.warmup_s)
            print(f"{text or 'sequential':45s} {r['rows_per_s']:9,.0f} {r['cores']:5.2f} "
                  f"{r['cpu_us_per_row']:6.2f} {r['wall_us_per_row']:6.2f}", flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
