"""How much cheaper per env step than the static default can any Seraph plan be?

Seraph's cost bar asks for a run to the target at least 30% cheaper than the static
default (2 functions, batch 4,000, 1,769 MB). A run's cost is its env steps to the target
times its cost per env step, so a plan can win on either factor. This tool bounds the
second from a saved profile, with the same models and price table the tuner plans with
(so every figure it prints is **modelled**):

* the static default's modelled cost per env step, and what it is made of;
* the cheapest shape in the tuner's search space, per env step;
* the floor no shape can go under (:meth:`optimizers.seraph.models.CostModel.per_step_floor`):
  function compute at the cheapest GB-seconds per step plus the learner's update per
  sample. Lambda's CPU share is proportional to memory below one vCPU, so a smaller size
  buys no cheaper step, and PPO's update time grows with the batch;
* from each, the env steps (as a share of the static default's) a plan would have to reach
  the target in to meet the bar.

Whether a plan can need that few env steps is a question for measured runs (the reference
runs in ``benchmarks/results/seraph-*-references-*.json``, the benchmark's own seeds);
this tool answers only the per-step half. It trains nothing and needs no lock.

    .venv/bin/python -m benchmarks.seraph_cost_floor \\
        --profile benchmarks/results/seraph-lunarlander-profile-2026-12-01.json --json-out FILE
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any


from optimizers.rl_baselines.static import STATIC_DEFAULT  # RLlib's PPO defaults as functions
from optimizers.seraph.models import CostModel, PerformanceModel
from serverless.run_shape import RunShape, RunShapeError

WORKLOAD_KEYS = ("env_id", "max_steps", "ppo", "architecture")
LABEL = "modelled: the tuner's performance model fitted to the profile, priced with serverless/data/prices.json"


def _shape(text: str) -> RunShape:
    try:
        a, m, b = (int(x) for x in text.lower().split("x"))
    except ValueError:
        a = m = b = 0
    if min(a, m, b) <= 0:
        raise argparse.ArgumentTypeError(f"a shape is ACTORSxMEMORY_MBxBATCH, positive whole numbers (e.g. 2x1769x4000), got {text!r}")
    try:
        return RunShape(a, m, b)
    except RunShapeError as exc:
        raise argparse.ArgumentTypeError(f"{text!r}: {exc}") from None


def _load_profile(path: Path) -> Any:
    from optimizers.seraph.workload_profile import Profile

    try:
        profile = Profile.from_dict(json.loads(path.read_text()))
        missing = [k for k in WORKLOAD_KEYS if k not in profile.workload]
    except (OSError, ValueError, KeyError, TypeError, AttributeError) as exc:
        raise SystemExit(f"--profile {path}: not a readable Seraph profile ({exc})") from None
    if missing:
        raise SystemExit(f"--profile {path}: not a readable Seraph profile (its workload lacks {', '.join(missing)})")
    return profile


def analyse(profile: Any, static: RunShape = STATIC_DEFAULT, bar: float = 0.7) -> dict[str, Any]:
    """Per-step modelled costs of the static default, the search space's cheapest shape and
    the floor, with the env-step share each would need to meet ``bar``."""
    from optimizers.seraph.pilot import Workload
    from optimizers.seraph.job import prices_for, search_space_for

    workload = Workload(**{k: profile.workload[k] for k in WORKLOAD_KEYS})
    cost = CostModel(PerformanceModel.fit(profile.observations), prices_for(workload.architecture))
    space = search_space_for(workload, tuple(profile.memory_sweep))
    shapes = space.shapes()
    static_cost = cost.per_step_cost(static)
    best = min(shapes, key=cost.per_step_cost)
    floor = cost.per_step_floor()

    def row(per_step: float) -> dict[str, float]:
        ratio = per_step / static_cost
        return {"usd_per_step": per_step, "vs_static": ratio, "env_steps_share_needed_for_bar": bar / ratio}

    by_batch = []
    for b in sorted({s.batch for s in shapes}):
        cheapest = min((s for s in shapes if s.batch == b), key=cost.per_step_cost)
        by_batch.append({"batch": b, "config": cheapest.to_dict(), **row(cost.per_step_cost(cheapest))})
    return {
        "env": workload.env_id,
        "label": LABEL,
        "bar_cost_ratio": bar,
        "static_default": {"config": static.to_dict(), "usd_per_step": static_cost,
                           "breakdown_usd_per_step": {k: v / static.batch for k, v in cost.breakdown(static).items()}},
        "cheapest_shape": {"config": best.to_dict(), **row(cost.per_step_cost(best))},
        "floor": {**floor, **row(floor["usd_per_step"])},
        "cheapest_by_batch": by_batch,
        "shapes_searched": len(shapes),
        "model_fit_error": cost.perf.fit_error,
    }


def print_report(res: dict[str, Any]) -> None:
    st, best, floor = res["static_default"], res["cheapest_shape"], res["floor"]
    nano = 1e9
    print(f"{res['env']}: cost per env step, MODELLED (profile's model, price table), in nano-USD")
    print(f"  static default {st['config']}: {st['usd_per_step'] * nano:.2f}  = "
          + ", ".join(f"{k} {v * nano:.2f}" for k, v in st["breakdown_usd_per_step"].items()))
    print(f"  cheapest of {res['shapes_searched']} shapes {best['config']}: {best['usd_per_step'] * nano:.2f} "
          f"({best['vs_static']:.3f}x static)")
    print(f"  floor: {floor['usd_per_step'] * nano:.2f} ({floor['vs_static']:.3f}x static) = function compute "
          f"{floor['function_compute_usd_per_step'] * nano:.2f} at {floor['cheapest_memory_mb']} MB + learner update "
          f"{floor['learner_update_usd_per_step'] * nano:.2f}")
    print(f"  {'batch':>7} {'cheapest shape':>16} {'x static':>9} {'env steps needed':>17}")
    for r in res["cheapest_by_batch"]:
        c = r["config"]
        print(f"  {r['batch']:>7} {c['actors']:>5} x {c['memory_mb']:>5} MB {r['vs_static']:>9.3f} {r['env_steps_share_needed_for_bar']:>16.2f}x")
    print(f"  to cost <= {res['bar_cost_ratio']:.2f}x the static default, a plan must reach the target in at most "
          f"{best['env_steps_share_needed_for_bar']:.2f}x its env steps at the cheapest shape, "
          f"{floor['env_steps_share_needed_for_bar']:.2f}x even at the floor")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--profile", type=Path, required=True, help="a Seraph profile JSON (TRAINWISE_HOME/profiles/seraph-*.json)")
    ap.add_argument("--static", type=_shape, default=STATIC_DEFAULT, help="the static default's shape (default 2x1769x4000)")
    ap.add_argument("--bar", type=float, default=0.7, help="the cost ratio to the static default to reach (default 0.7)")
    ap.add_argument("--json-out", type=Path)
    args = ap.parse_args(argv)
    if not 0 < args.bar:
        ap.error(f"--bar must be a positive ratio, got {args.bar}")
    res = analyse(_load_profile(args.profile), args.static, args.bar)
    print_report(res)
    if args.json_out:
        from core.results import write_json

        print(f"written to {write_json(args.json_out, res)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
