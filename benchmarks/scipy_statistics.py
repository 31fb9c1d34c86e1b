"""The statistics on scipy against the hand-made code they replaced, on the same inputs.

    python -m benchmarks.scipy_statistics [--json-out FILE]

- **Progress fit** (``optimizers.seraph.stats.fit_progress``): ``least_squares`` against the
  701-point log grid over B_noise, on every measured reference's points: E_min, B_noise, the
  sum of squared log errors, and the planner's E(B) (through the points) at batches 128-32,768.
- **Online layout bootstrap** (``optimizers.seraph.online_layout.bootstrap_draws``):
  ``scipy.stats.bootstrap`` (paired) against a loop of numpy draws, on random pair statistics:
  the draws compared one by one, and the time per call (measured).
- **Hand-off overhead** (``ingestion.calibrate.fit_async_overhead``): ``brentq`` against 40
  bisections, on the known pipeline of the calibration tests: the overhead found and the
  simulator calls it took.

The hand-made versions live here only, as the references. Timings are measured on this
machine (the load average is recorded); every other figure is exact arithmetic.
"""

from __future__ import annotations

import argparse
import json
import math
import time
from dataclasses import replace
from pathlib import Path
from typing import Any, Callable

import numpy as np

from benchmarks._common import machine_state, print_table, write_result

REFERENCE_FILES = sorted((Path(__file__).resolve().parents[1] / "optimizers" / "seraph" / "data").glob("references*.json"))
BATCHES = (128, 256, 512, 1024, 2048, 4096, 8192, 16384, 32768)


def grid_fit_progress(points: list[tuple[int, float]]) -> tuple[float, float]:
    """The replaced fit: B_noise on a 701-point log grid over [1, 1e7], E_min in closed form."""
    logs = [(b, math.log(e)) for b, e in points]
    best: tuple[float, float, float] | None = None
    for bn in np.logspace(0, 7, 701):
        resid = [le - math.log(1 + b / bn) for b, le in logs]
        lm = sum(resid) / len(resid)
        err = sum((r - lm) ** 2 for r in resid)
        if best is None or err < best[0]:
            best = (err, float(bn), math.exp(lm))
    assert best is not None
    return best[2], best[1]


def loop_bootstrap_draws(units: list[dict[str, float]], chunks: int, envs: int, seed: int, draws: int) -> list[float]:
    """The replaced bootstrap: ``draws`` resamples of ``units`` drawn one by one."""
    from optimizers.seraph.online_layout import predicted_ratio

    rng = np.random.default_rng(seed)
    return sorted(predicted_ratio([units[i] for i in rng.integers(0, len(units), len(units))], chunks, envs)
                  for _ in range(draws))


def bisect_overhead(excess: Callable[[float], float], hi: float) -> float:
    """The replaced root search: 40 halvings of [0, hi]."""
    lo = 0.0
    for _ in range(40):
        mid = (lo + hi) / 2
        lo, hi = (mid, hi) if excess(mid) > 0 else (lo, mid)
    return (lo + hi) / 2


def sse(points: list[tuple[int, float]], e_min: float, bn: float) -> float:
    return sum((math.log(e) - math.log(e_min) - math.log1p(b / bn)) ** 2 for b, e in points)


def reference_point_sets() -> list[tuple[str, list[tuple[int, float]]]]:
    out = []
    for path in REFERENCE_FILES:
        for env, entry in json.loads(path.read_text())["envs"].items():
            for e in [entry, *entry.get("by_actors", {}).values()]:
                pts = [(int(b), float(x)) for b, x in e.get("points", [])]
                if len(pts) >= 2:
                    out.append((f"{path.stem}:{env}:{e.get('actors')}", pts))
    return out


def progress_fits() -> list[dict[str, Any]]:
    from optimizers.seraph.models import ProgressModel
    from optimizers.seraph.stats import fit_progress

    rows = []
    for name, pts in reference_point_sets():
        (e0, b0), (e1, b1) = grid_fit_progress(pts), fit_progress(pts)
        before = ProgressModel.through_points(b0, e0, pts)
        after = ProgressModel.through_points(b1, e1, pts)
        moved = max(abs(after.env_steps(b) / before.env_steps(b) - 1) for b in BATCHES)
        rows.append({"points": name, "b_noise_before": b0, "b_noise_after": b1, "e_min_before": e0, "e_min_after": e1,
                     "sse_before": sse(pts, e0, b0), "sse_after": sse(pts, e1, b1), "e_of_b_largest_change": moved})
    return rows


def _units(rng: np.random.Generator, n: int, m: int) -> list[dict[str, float]]:
    return [{"var_env": abs(rng.normal(1.0, 0.6)), "var_chunk": abs(rng.normal(m * 0.8, 0.6 * m)),
             "signal": rng.normal(1.0, 0.8), "bias": abs(rng.normal(0.01 * m, 0.01 * m))} for _ in range(n)]


def bootstraps(calls: int) -> list[dict[str, Any]]:
    from optimizers.seraph.online_layout import OnlineLayoutSettings, bootstrap_draws

    draws = OnlineLayoutSettings().bootstrap_draws
    rng = np.random.default_rng(1)
    rows = []
    for n in (2, 4, 16, 64):
        units = _units(rng, n, 4)
        diff = 0.0  # the resamples are the same draws of one generator; sums may round differently
        for s in range(20):
            a = np.array(loop_bootstrap_draws(units, 4, 4, s, draws))
            b = np.array(bootstrap_draws(units, 4, 4, s))
            finite = np.isfinite(a)
            assert np.array_equal(finite, np.isfinite(b))
            diff = max(diff, float(np.max(np.abs(b[finite] / a[finite] - 1), initial=0.0)))
        times = {}
        for name, fn in (("before", lambda s: loop_bootstrap_draws(units, 4, 4, s, draws)),
                         ("after", lambda s: bootstrap_draws(units, 4, 4, s))):
            t = time.perf_counter()
            for s in range(calls):
                fn(s)
            times[name] = (time.perf_counter() - t) / calls * 1e3
        rows.append({"units": n, "largest_relative_draw_difference_20_seeds": diff, "ms_before": times["before"],
                     "ms_after": times["after"], "speedup": times["before"] / times["after"]})
    return rows


def overheads() -> list[dict[str, Any]]:
    import ingestion.calibrate as cal
    from ingestion.knobs import Knob, KnobSpace
    from ingestion.node import Node
    from ingestion.simulator import model_from_space, simulate

    space = KnobSpace((Knob("read_par", (0, 1, 2, 4), kind="cpu", stage="read", default=0),
                       Knob("parse_par", (0, 1, 2, 4), kind="cpu", stage="parse", default=0)), cpu_budget=4, name="b")
    model = model_from_space(space, costs={"read": {"cpu_s_per_row": 2e-6}, "parse": {"cpu_s_per_row": 5e-6}},
                             source="benchmark")
    rows = []
    for vcpus in (2, 4):
        node = Node(f"n{vcpus}", vcpus=vcpus, ram_gib=8)
        for par in (1, 2):
            config = {"read_par": par, "parse_par": 0}
            for true in (25e-6, 300e-6):
                slowed = replace(model, stages=tuple(replace(s, async_cpu_s_per_call=true) if s.name == "read" else s
                                                     for s in model.stages))
                measured = simulate(slowed, config, node).rows_per_s
                calls = [0]

                def excess(x: float) -> float:
                    calls[0] += 1
                    m = replace(model, stages=tuple(replace(s, async_cpu_s_per_call=x) if s.name == "read" else s
                                                    for s in model.stages))
                    return simulate(m, config, node).rows_per_s - measured

                hi = 1e-6
                while excess(hi) > 0 and hi < 10.0:
                    hi *= 2
                before = bisect_overhead(excess, hi)
                before_calls, calls[0] = calls[0], 0
                original, counted = cal.simulate, [0]

                def counting(*a: Any, **k: Any) -> Any:
                    counted[0] += 1
                    return original(*a, **k)

                cal.simulate = counting
                try:
                    after = cal.fit_async_overhead(model, node, "read", config, measured)
                finally:
                    cal.simulate = original
                rows.append({"vcpus": vcpus, "read_threads": par, "true_us": true * 1e6, "before_us": before * 1e6,
                             "after_us": after * 1e6, "sim_calls_before": before_calls, "sim_calls_after": counted[0]})
    return rows


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--calls", type=int, default=30, help="bootstrap calls timed per size (default 30)")
    ap.add_argument("--json-out", default=None)
    args = ap.parse_args(argv)
    load = machine_state()
    fits, boots, roots = progress_fits(), bootstraps(args.calls), overheads()
    print_table(["points", "B_noise grid", "B_noise lsq", "E_min grid", "E_min lsq", "SSE grid", "SSE lsq", "E(B) moved"],
                [[r["points"], r["b_noise_before"], r["b_noise_after"], r["e_min_before"], r["e_min_after"],
                  f"{r['sse_before']:.5f}", f"{r['sse_after']:.5f}", f"{r['e_of_b_largest_change']:.2%}"] for r in fits],
                title="progress fit: 701-point grid (before) vs least_squares (after), exact", digits=0)
    print_table(["units", "largest draw difference", "ms before", "ms after", "speed-up"],
                [[r["units"], f"{r['largest_relative_draw_difference_20_seeds']:.1e}", r["ms_before"], r["ms_after"], r["speedup"]] for r in boots],
                title=f"\nonline layout bootstrap: loop (before) vs scipy.stats.bootstrap (after); ms measured, "
                      f"load {load['loadavg_1m']}", digits=2)
    print_table(["vCPUs", "read threads", "true us", "bisection us", "brentq us", "sims before", "sims after"],
                [[r["vcpus"], r["read_threads"], r["true_us"], r["before_us"], r["after_us"], r["sim_calls_before"],
                  r["sim_calls_after"]] for r in roots],
                title="\nhand-off overhead: 40 bisections (before) vs brentq (after), exact", digits=4)
    write_result(args.json_out, {"benchmark": "scipy_statistics", "progress_fit": fits, "bootstrap": boots,
                                 "bootstrap_label": "measured", "overhead": roots, "machine": load})
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
