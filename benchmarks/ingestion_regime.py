"""How many cores the DLRM pipeline gets, and what it does with them (measured; a diagnosis tool,
not part of any bar). Run it under the bench lock; every measurement is in one measurement worker
(``ingestion.measure``) and records the cores its process kept busy (``cores_busy``) and the
cores every other process kept busy meanwhile (``other_cores_busy``, from ``/proc/stat``).

Three modes, the ones behind docs/intune.md "Stop 17":

* ``protocols``: for the base (single-thread) configuration and six thread splits, three rounds
  of the calibration's protocol (0.5 s warm-up, one 1 s window) then the grid's (1 s warm-up,
  two 1.5 s windows).
* ``timeline``: the same splits in rotated order, 16 consecutive 0.25 s windows from the first
  element on (no warm-up): how long a configuration takes to reach its rate.
* ``profile``: the calibration's stage profile (single-thread prefix rates and their cores),
  three times: the input of the helper CPU (``ingestion.calibrate.helper_costs_from_prefixes``).

    flock /tmp/trainwise-bench.lock .venv/bin/python -m benchmarks.ingestion_regime timeline \\
        --formats tsv,tfrecord --json-out benchmarks/results/intune-regime-timeline-s17.json
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path
from typing import Any

BASE = dict(read_parallelism=0, cycle_length=1, shuffle_buffer=1024, batch_size=4096, parse_parallelism=0,
            transform_parallelism=0, prefetch_buffer=1)
SPLITS = {"base": {}, "p1": {"parse_parallelism": 1}, "t1": {"transform_parallelism": 1},
          "p2": {"parse_parallelism": 2}, "t2": {"transform_parallelism": 2},
          "p1t1": {"parse_parallelism": 1, "transform_parallelism": 1}, "r1": {"read_parallelism": 1}}
CALIBRATION = dict(warmup_s=0.5, window_s=1.0, repeats=1)
GRID = dict(warmup_s=1.0, window_s=1.5, repeats=2)


def _record(m: Any, **fields: Any) -> dict[str, Any]:
    return {**fields, "rows_per_s": m.rows_per_s, "cores_busy": m.extra.get("cores_busy"),
            "other_cores_busy": m.extra.get("other_cores_busy"), "windows": m.extra.get("windows_rows_per_s"),
            "t": time.time(), "label": "measured"}


def run(mode: str, fmt: str, data_root: Path, rounds: int) -> list[dict[str, Any]]:
    from benchmarks.ingestion import _ensure_data
    from ingestion.dlrm import dlrm_spec
    from ingestion.measure import MeasureWorker
    from ingestion.node import this_machine

    node = this_machine()
    spec = dlrm_spec(str(_ensure_data(data_root, fmt, 200_000, 0)), fmt, node)
    out: list[dict[str, Any]] = []
    with MeasureWorker(spec, memory_limit_mb=node.ram_budget_mb) as w:
        w.measure(BASE, warmup_s=0.5, window_s=0.5, repeats=1)  # start the worker (TensorFlow's import)
        names = list(SPLITS) if mode == "protocols" else ["base", "p1", "p2", "t2", "r1"]
        for r in range(rounds):
            if mode == "profile":
                m = w.measure(BASE, warmup_s=0.5, window_s=1.0, repeats=2, stage_profile=True)
                out.append(_record(m, round=r, name="profile", stage_rows_per_s=m.extra["stage_rows_per_s"],
                                   stage_cores_busy=m.extra["stage_cores_busy"]))
                print(fmt, r, {s: (round(m.extra["stage_rows_per_s"][s]), round(m.extra["stage_cores_busy"][s], 2))
                               for s in spec.stages}, file=sys.stderr, flush=True)
                continue
            order = names[r % len(names):] + names[:r % len(names)] if mode == "timeline" else names
            for name in order:
                config = {**BASE, **SPLITS[name]}
                protocols = [("calibration", CALIBRATION), ("grid", GRID)] if mode == "protocols" else \
                    [("timeline", dict(warmup_s=0.0, window_s=0.25, repeats=16))]
                for proto, kw in protocols:
                    m = w.measure(config, **kw)
                    out.append(_record(m, round=r, name=name, protocol=proto))
                    print(fmt, r, name, proto, round(m.rows_per_s), round(m.extra.get("cores_busy") or 0, 2),
                          file=sys.stderr, flush=True)
    return out


def summary(records: list[dict[str, Any]]) -> dict[str, Any]:
    """Per configuration: median rows/s relative to the base's median, and median cores busy."""
    by: dict[str, list[dict[str, Any]]] = {}
    for r in records:
        by.setdefault(r["name"], []).append(r)
    if "base" not in by:
        return {}
    rate = lambda r: statistics.fmean(r["windows"][4:]) if r.get("protocol") == "timeline" else r["rows_per_s"]  # noqa: E731
    base = statistics.median(rate(r) for r in by["base"])
    return {n: {"relative_to_base": statistics.median(rate(r) for r in rs) / base,
                "cores_busy": statistics.median(r["cores_busy"] or 0.0 for r in rs)} for n, rs in by.items()}


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("mode", choices=["protocols", "timeline", "profile"])
    p.add_argument("--formats", default="tsv,tfrecord")
    p.add_argument("--rounds", type=int, default=None, help="default: 3 (protocols, profile), 4 (timeline)")
    p.add_argument("--data-root", default=".trainwise/bench-data")
    p.add_argument("--json-out", default=None)
    a = p.parse_args(argv)
    rounds = a.rounds or (4 if a.mode == "timeline" else 3)
    result: dict[str, Any] = {"benchmark": "ingestion_regime", "mode": a.mode, "formats": {}}
    for fmt in a.formats.split(","):
        records = run(a.mode, fmt, Path(a.data_root), rounds)
        result["formats"][fmt] = {"records": records, "summary": summary(records)}
        print(fmt, result["formats"][fmt]["summary"])
    if a.json_out:
        from core.results import write_json

        write_json(a.json_out, result)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
