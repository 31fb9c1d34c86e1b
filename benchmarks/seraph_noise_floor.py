"""How often would a *perfect* tuner pass the "within 15% of the grid oracle" bar?

Seraph's oracle bars compare the median over 3 seeds of Seraph's cost (or time) to
reach the target with the grid oracle's: the best median, over the grid's top shapes,
re-run on the same 3 seeds. At a fixed shape, cost and time are proportional to the
env steps to the target (to within the clock's drift), and those steps spread 2-5x
across seeds. A fresh Seraph run starts on a different trajectory from every oracle
run (its pilot trains first), so even a tuner that picks a shape exactly as good as the
oracle's is compared with the *smallest* of several medians of 3 draws from the same
spread: the winner's curse.

This tool puts a number on it, by resampling the measured reference runs that ship
with Seraph (``optimizers/seraph/data/references.json``: env steps to the target per
seed, at several batch sizes and actor counts): each group of runs at one shape is
divided by its own median and the groups at the chosen batch are pooled. Then, many
times over:

* the perfect tuner's figure is the median of ``n`` draws (``n`` seeds);
* the oracle's is the smallest, over ``k`` independent trajectories, of the median of
  ``n`` draws. Shapes that differ only in memory size train on the same trajectory
  (same seed, same batch and actors), so the oracle's top 3 shapes hold 2-3
  independent trajectories.

It prints P(ratio <= 1.15) and the median ratio. Everything here is resampled from
measured env-step counts; no timing is taken, so it needs no lock.

    .venv/bin/python benchmarks/seraph_noise_floor.py --json-out benchmarks/results/seraph-noise-floor.json
"""

from __future__ import annotations

import argparse
import sys
from collections import defaultdict
from pathlib import Path
from typing import Any

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

# the batch of the oracle's shape in the latest runs (docs/seraph.md)
DEFAULT_BATCH = {"CartPole-v1": 1024, "LunarLander-v3": 2048}
MIN_RUNS = 5  # a group needs this many reached runs for its median to normalise by


def relative_steps(env: dict[str, Any], batch: int) -> np.ndarray:
    """Every reached run's env steps at ``batch`` over its own shape's median, pooled."""
    groups: dict[int, list[float]] = defaultdict(list)
    sources = [(int(env["actors"]), env["runs"])]
    sources += [(int(a), e.get("runs", [])) for a, e in env.get("by_actors", {}).items()]
    for actors, runs in sources:
        for r in runs:
            if r["batch"] == batch and r["reached"] and not r.get("censored", False):
                groups[actors].append(float(r["env_steps"]))
    pooled = [np.asarray(v) / np.median(v) for v in groups.values() if len(v) >= MIN_RUNS]
    if not pooled:
        raise ValueError(f"no shape at batch {batch} has {MIN_RUNS} or more reached reference runs")
    return np.concatenate(pooled)


def pass_probability(rel: np.ndarray, seeds: int, trajectories: int, *, bar: float = 1.15,
                     draws: int = 100_000, seed: int = 0) -> dict[str, float]:
    """Resampled ratio of a perfect tuner's median to a best-of-``trajectories`` oracle's."""
    if seeds < 1 or trajectories < 1:
        raise ValueError("seeds and trajectories must be at least 1")
    rng = np.random.default_rng(seed)
    tuner = np.median(rng.choice(rel, (draws, seeds)), axis=1)
    oracle = np.min(np.median(rng.choice(rel, (draws, trajectories, seeds)), axis=2), axis=1)
    ratio = tuner / oracle
    return {
        "p_within_bar": float(np.mean(ratio <= bar)),
        "median_ratio": float(np.median(ratio)),
        "ratio_p10": float(np.quantile(ratio, 0.10)),
        "ratio_p90": float(np.quantile(ratio, 0.90)),
    }


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--seeds", default="3,5,8", help="seed counts to evaluate (default 3,5,8)")
    ap.add_argument("--trajectories", default="1,2,3", help="independent oracle trajectories (default 1,2,3)")
    ap.add_argument("--bar", type=float, default=1.15)
    ap.add_argument("--json-out", type=Path)
    args = ap.parse_args(argv)
    try:
        seed_counts = [int(s) for s in args.seeds.split(",")]
        trajectories = [int(k) for k in args.trajectories.split(",")]
    except ValueError:
        ap.error("--seeds and --trajectories take comma-separated whole numbers, e.g. 3,5,8")
    from optimizers.seraph.references import REFERENCES_PATH, load_references

    refs = load_references()
    if not refs:
        raise SystemExit(f"no reference runs in {REFERENCES_PATH}")
    out: dict[str, Any] = {
        "benchmark": "seraph_noise_floor",
        "label": "resampled from measured reference runs (env steps to the target); no timing",
        "source": str(REFERENCES_PATH.relative_to(ROOT)),
        "bar": args.bar,
        "envs": [],
    }
    for env_id, env in refs.items():
        batch = DEFAULT_BATCH.get(env_id, int(env["points"][0][0]))
        rel = relative_steps(env, batch)
        rows = [{"seeds": n, "oracle_trajectories": k, **pass_probability(rel, n, k, bar=args.bar)}
                for n in seed_counts for k in trajectories]
        out["envs"].append({"env": env_id, "batch": batch, "runs_pooled": int(rel.size),
                            "relative_steps_spread": [float(rel.min()), float(rel.max())], "rows": rows})
        print(f"{env_id} at batch {batch}: {rel.size} reference runs pooled, steps {rel.min():.2f}-{rel.max():.2f}x "
              f"their shape's median")
        print(f"  {'seeds':>5} {'oracle traj.':>12} {'P(<= %.2fx)' % args.bar:>12} {'median':>7} {'p10-p90':>11}")
        for r in rows:
            print(f"  {r['seeds']:>5} {r['oracle_trajectories']:>12} {r['p_within_bar']:>12.2f} "
                  f"{r['median_ratio']:>7.2f} {r['ratio_p10']:>5.2f}-{r['ratio_p90']:.2f}")
    if args.json_out:
        from core.results import write_json

        print(f"written to {write_json(args.json_out, out)}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
