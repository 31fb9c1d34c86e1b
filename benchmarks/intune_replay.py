"""Replay InTune on a grid that was measured on the real pipeline.

Every "measurement" InTune asks for (its calibration and its live steps) is the value measured
for that configuration in an earlier grid run, looked up: no timing happens, so the replay is
deterministic and needs no bench lock. It shows what the current calibration and tuner would
choose given those measurements; it is **not** a live measurement (labelled "replay of measured
grid"), and the calibration uses 9 of the grid's points (in-sample for those).

    python -m benchmarks.intune_replay --grid runs/ingestion-bench-tsv.json --prefix-from sim_error.json
    python -m benchmarks.intune_replay --grid sim_error.json          # from benchmarks.ingestion_sim

``--grid`` takes either the simulator-error JSON of ``benchmarks.ingestion_sim --sim-error-data``
(which also holds the prefix timings) or the pipeline helper's ``benchmarks/ingestion.py`` JSON
(its grid search history; prefix timings then come from ``--prefix-from``: another run's
simulator-error JSON, a saved calibration profile (``Calibration.to_json``) or a
``benchmarks/ingestion.py`` JSON that holds its calibration (``real[0].calibration``)).
"""

from __future__ import annotations

import argparse
import json
import os
import tempfile
from types import SimpleNamespace
from typing import Any

import numpy as np


def _load(grid_path: str, prefix_path: str | None) -> tuple[dict[tuple, float], dict[str, float]]:
    data = json.load(open(grid_path))
    if "simulator_error" in data:
        d = data["simulator_error"]
        grid = {tuple(sorted(p["config"].items())): p["measured_rows_per_s"] for p in d["points"]}
        return grid, d["calibration"]["prefix_rows_per_s"]
    history = data["real"][0]["search_history"]["grid"]
    grid = {tuple(sorted(t["config"].items())): t["rows_per_s"] for t in history}
    if not prefix_path:
        raise SystemExit("--prefix-from is needed with a benchmarks/ingestion.py JSON (it has no prefix timings)")
    source = json.load(open(prefix_path))
    if "prefix_rows_per_s" in source:  # a saved calibration profile (Calibration.to_json)
        return grid, source["prefix_rows_per_s"]
    if "calibration" in source.get("real", [{}])[0]:  # a benchmarks/ingestion.py JSON that saved its calibration
        return grid, source["real"][0]["calibration"]["prefix_rows_per_s"]
    return grid, source["simulator_error"]["calibration"]["prefix_rows_per_s"]


def replay(grid: dict[tuple, float], prefix: dict[str, float], max_trials: int = 25) -> dict[str, Any]:
    os.environ.setdefault("TRAINWISE_HOME", tempfile.mkdtemp(prefix="intune-replay-"))
    from ingestion.calibrate import calibrate
    from ingestion.dlrm import STAGES, dlrm_knob_space
    from ingestion.node import this_machine
    from ingestion.simulator import simulate
    from ingestion.measurement import Measurement
    from optimizers.asktell import run
    from optimizers.intune.agent import MaskedDQN
    from optimizers.intune.pretrain import PRETRAINED
    from optimizers.intune.tuner import InTuneOptimizer

    node = this_machine()
    space = dlrm_knob_space(node)

    def lookup(config: dict, **kw: Any) -> Measurement:
        extra = {"stage_rows_per_s": prefix} if kw.get("stage_profile") else {}
        return Measurement(grid[tuple(sorted(config.items()))], peak_rss_mb=800.0, extra=extra)

    def no_build(config: dict, stage: str) -> Any:
        raise RuntimeError("replay: nothing is built")

    spec = SimpleNamespace(name="dlrm-tsv-replay", space=space, stages=STAGES, build_upto=no_build, portable=False)
    cal = calibrate(spec, node, evaluate=lookup, use_cache=False)
    errors = [abs(simulate(cal.model, dict(k), node).rows_per_s - x) / x for k, x in grid.items()]
    opt = InTuneOptimizer(space, node, cal.model, MaskedDQN.load(PRETRAINED))
    res = run(opt, lookup, max_trials=max_trials)
    best = max(grid.values())
    pick = opt.best  # its recommendation (a replay measures a configuration the same every time)
    return {
        "label": "replay of measured grid",
        "grid_points": len(grid),
        "simulator_error_mean": float(np.mean(errors)),
        "simulator_error_median": float(np.median(errors)),
        "start": opt.start,
        "start_rows_per_s": grid[tuple(sorted(opt.start.items()))],
        "intune_config": pick[0] if pick else None,
        "intune_rows_per_s": pick[1].rows_per_s if pick else None,
        "grid_best_rows_per_s": best,
        "intune_vs_grid_best": (pick[1].rows_per_s / best) if pick else None,
        "trials": len(res.trials),
        "stopped_by": opt.finished,
    }


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description="Replay InTune on a measured grid (no timing; labelled replay)")
    p.add_argument("--grid", required=True)
    p.add_argument("--prefix-from", default=None)
    p.add_argument("--json-out", default=None)
    args = p.parse_args(argv)
    grid, prefix = _load(args.grid, args.prefix_from)
    result = replay(grid, prefix)
    print(f"[replay of measured grid] InTune {result['intune_rows_per_s']:,.0f} rows/s = "
          f"{result['intune_vs_grid_best']:.3f}x the grid best in {result['trials']} trials; simulator error "
          f"mean {result['simulator_error_mean']:.3f} over {result['grid_points']} points")
    if args.json_out:
        from core.results import write_json

        write_json(args.json_out, result)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
