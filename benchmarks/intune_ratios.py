"""Where the calibrated simulator's *shape* is wrong, from a saved benchmark result (no timing).

The level of the real pipeline drifts (the base configuration, measured as a control every 10 grid
points, moved 1.5x within a grid), so comparing the model with the grid point by point mixes the
model's structure with the machine's level. This separates them: every grid measurement is divided
by the controls around it (linear interpolation between the control before its block and the one
after, per pass), which gives the configuration's speed **relative to the base configuration at
that moment** (measured); the model's relative speed is its prediction over its prediction for
the base configuration (modelled). Both are averaged (geometric mean over passes and over the
configurations of one CPU split).

It also sets each calibration point (knob variants, thread points, contention points: measured
once during calibration, against the calibration's anchor) beside the grid's relative speed of
the same configuration: a ratio below 1 means the calibration measured that configuration slower,
relative to its base, than the grid did.

    .venv/bin/python -m benchmarks.intune_ratios benchmarks/results/ingestion-bench-tsv-s12.json [...]

Needs a result with controls (``drift``), i.e. a run of Dec 1 or later.
"""

from __future__ import annotations

import argparse
import json
import math
import statistics
from collections import defaultdict
from typing import Any


def _key(config: dict[str, int]) -> tuple:
    return tuple(sorted(config.items()))


def control_normalised(real: dict[str, Any]) -> dict[tuple, float]:
    """Per grid configuration: its measurement over the interpolated controls (geometric mean over
    passes). Controls are measured before every ``every``-th grid point of a pass and after its last."""
    controls: dict[int, dict[int, float]] = defaultdict(dict)
    for c in real["drift"]["controls"]:
        if c["rows_per_s"] > 0:
            controls[int(c.get("pass", 1))][int(c["before_trial"])] = c["rows_per_s"]
    out: dict[tuple, float] = {}
    for index, t in enumerate(real["search_history"]["grid"]):
        rates = t.get("rows_per_s_passes", [t["rows_per_s"]])
        positions = t.get("pass_trials", [index])
        logs = []
        for p, (rate, pos) in enumerate(zip(rates, positions)):
            marks = sorted(controls.get(p + 1, {}))
            if rate <= 0 or not marks:
                continue
            lo = max([m for m in marks if m <= pos], default=marks[0])
            hi = min([m for m in marks if m > pos], default=marks[-1])
            a, b = controls[p + 1][lo], controls[p + 1][hi]
            w = (pos + 0.5 - lo) / (hi - lo) if hi > lo else 0.0
            logs.append(math.log(rate / (a * (1 - w) + b * w)))
        if logs:
            out[_key(t["config"])] = math.exp(statistics.fmean(logs))
    return out


def report(path: str) -> dict[str, Any]:
    from ingestion.node import Node
    from ingestion.simulator import PipelineModel, simulate

    data = json.load(open(path))
    real = data["real"][0]
    n = data["node"]
    node = Node(n["name"], vcpus=n["vcpus"], ram_gib=n["ram_gib"], hourly_usd=n.get("hourly_usd", 0.0))
    cal = real["calibration"]
    model = PipelineModel.from_json(cal["model"])
    base = cal["profile_config"]
    sim_base = simulate(model, base, node).rows_per_s
    measured = control_normalised(real)
    threads = [s.threads_knob for s in model.stages if s.threads_knob]
    splits: dict[tuple, list[tuple[float, float]]] = defaultdict(list)
    for t in real["search_history"]["grid"]:
        k = _key(t["config"])
        if k in measured:
            splits[tuple(t["config"][x] for x in threads)].append(
                (measured[k], simulate(model, t["config"], node).rows_per_s / sim_base))
    geo = lambda xs: math.exp(statistics.fmean(math.log(x) for x in xs))  # noqa: E731
    rows = [{"split": dict(zip(threads, s)), "configs": len(v), "measured_relative": geo([a for a, _ in v]),
             "modelled_relative": geo([b for _, b in v])} for s, v in sorted(splits.items())]
    anchor = cal["fit_points"][0]["measured"]
    points = []
    for p in cal["fit_points"][1:]:
        k = _key(p["config"])
        if k in measured and anchor > 0:
            raw = p.get("measured_raw", p["measured"])
            points.append({"config": p["config"], "calibration_relative": raw / anchor,
                           "grid_relative": measured[k], "calibration_over_grid": raw / anchor / measured[k]})
    errors = [abs(b / a - 1) for v in splits.values() for a, b in v]
    return {"file": path, "format": real["format"], "profile_config": base, "label": "measured relative speeds (grid over its controls) "
            "beside the model's (modelled)", "splits": rows, "calibration_points": points,
            "relative_error_mean": statistics.fmean(errors) if errors else None}


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("results", nargs="+", help="benchmarks/ingestion.py result JSON files with controls")
    p.add_argument("--json-out", default=None)
    args = p.parse_args(argv)
    out = []
    for path in args.results:
        r = report(path)
        out.append(r)
        print(f"== {path} ({r['format']}): mean |modelled/measured - 1| of the relative speeds "
              f"{r['relative_error_mean']:.1%}")
        for s in r["splits"]:
            print(f"  {s['split']}: measured {s['measured_relative']:.2f}, modelled {s['modelled_relative']:.2f} "
                  f"({s['configs']} configurations)")
        for q in r["calibration_points"]:
            changed = {k: v for k, v in q["config"].items() if v != r["profile_config"].get(k)}
            print(f"  calibration point {changed}: calibration {q['calibration_relative']:.2f}, grid "
                  f"{q['grid_relative']:.2f}, ratio {q['calibration_over_grid']:.2f}")
    if args.json_out:
        from core.results import write_json

        write_json(args.json_out, {"benchmark": "intune_ratios", "reports": out})
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
