"""Training under injected faults against fault-free training, side by side.

Runs ``trainwise rl train`` on CartPole-v1 (target 475, 100,000 env steps) for each seed
and each variant, one after another, and writes one JSON with every run's env steps to
the target (measured), time on Lambda and cost (modelled), the faults' cost and the
rollout counters, plus each faulty run's env steps over the fault-free run of its seed
and whether it lies within the fault-free runs' spread.

Variants: ``free`` (no faults), ``faults`` (the issue's mix: errors 0.1, timeouts 0.05,
stragglers 0.1, throttle 0.1), ``faults-t10`` (the same with a 10 s function timeout),
``errors30`` (errors 0.3, first seed only), each in the default layout (one env per
function: 4 actors x 64 steps) and with env slots of 32 steps (``slots-`` prefix). ``--spread-seeds`` adds fault-free runs that only widen the spread.

    .venv/bin/python -m benchmarks.rl_faults --seeds 1,2,3 --spread-seeds 4,5,6,7,8,9,10 \\
        --out-dir /tmp/rl-faults --json-out benchmarks/results/rl-faults-2026-12-02.json

``--summarise-only`` rebuilds the JSON from the run files already in ``--out-dir``.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
MIX = "errors=0.1,timeouts=0.05,stragglers=0.1,throttle=0.1,seed=1"
VARIANTS: dict[str, list[str]] = {
    "free": [],
    "faults": ["--inject-faults", MIX],
    "faults-t10": ["--inject-faults", MIX + ",timeout_s=10"],
    "errors30": ["--inject-faults", "errors=0.3,seed=1"],
}
SLOTS = ["--steps-per-env", "32"]


def _command(seed: int, variant: str, out: Path) -> list[str]:
    base, slots = variant.removeprefix("slots-"), variant.startswith("slots-")
    return [
        sys.executable, "-m", "trainwise", "rl", "train", "--env", "CartPole-v1", "--target-reward", "475",
        "--max-steps", "100000", "--seed", str(seed), "--no-progress", "--checkpoint-every", "0",
        *(SLOTS if slots else []), *VARIANTS[base], "--json-out", str(out),
    ]


def _plan(seeds: list[int], spread: list[int]) -> list[tuple[int, str]]:
    runs = []
    for prefix in ("", "slots-"):
        runs += [(s, prefix + v) for s in seeds for v in ("free", "faults", "faults-t10")]
        runs += [(seeds[0], prefix + "errors30")]
    return runs + [(s, "free") for s in spread]


def _row(seed: int, variant: str, d: dict[str, Any]) -> dict[str, Any]:
    f = d.get("faults") or {}
    return {
        "seed": seed,
        "variant": variant,
        "reached": d["reached"],
        "stop_reason": d["stop_reason"],
        "env_steps": d["env_steps"],
        "final_mean_return": d["final_mean_return"],
        "lambda_time_s": d["lambda_time_s"],
        "cost_usd": d["cost_usd"],
        "fault_cost_usd": d["ledger"]["faults"]["usd"],
        "injected": f.get("injected"),
        "retries": f.get("retries"),
        "hedges": f.get("hedges"),
        "hedge_wins": f.get("hedge_wins"),
        "lost_rollouts": d["lost_rollouts"],
        "duplicate_rollouts": d["duplicate_rollouts"],
    }


def summarise(rows: list[dict[str, Any]]) -> dict[str, Any]:
    """Per faulty run: env steps over its seed's fault-free run, and within the spread or not."""
    free = {(r["seed"], r["variant"].startswith("slots-")): r for r in rows if r["variant"].removeprefix("slots-") == "free"}
    spread = [r["env_steps"] for r in rows if r["variant"] == "free"]
    out = []
    for r in rows:
        if r["variant"].removeprefix("slots-") == "free":
            continue
        ref = free.get((r["seed"], r["variant"].startswith("slots-")))
        out.append({
            "seed": r["seed"],
            "variant": r["variant"],
            "reached": r["reached"],
            "steps_over_fault_free": r["env_steps"] / ref["env_steps"] if ref else None,
            # what faults change in learning: nothing, if the env steps and final return are the seed's own
            "learned_as_fault_free": (r["env_steps"], r["final_mean_return"]) == (ref["env_steps"], ref["final_mean_return"])
            if ref else None,
            "within_fault_free_spread": min(spread) <= r["env_steps"] <= max(spread) if spread else None,
            "cost_over_fault_free": r["cost_usd"] / ref["cost_usd"] if ref else None,
            "time_over_fault_free": r["lambda_time_s"] / ref["lambda_time_s"] if ref else None,
        })
    return {
        "fault_free_spread_env_steps": [min(spread), max(spread)] if spread else None,
        "fault_free_seeds": sorted(r["seed"] for r in rows if r["variant"] == "free"),
        "faulty_runs": out,
    }


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--seeds", default="1,2,3")
    ap.add_argument("--spread-seeds", default="")
    ap.add_argument("--out-dir", type=Path, required=True, help="where each run's JSON goes")
    ap.add_argument("--json-out", type=Path, required=True)
    ap.add_argument("--summarise-only", action="store_true")
    args = ap.parse_args()
    seeds = [int(s) for s in args.seeds.split(",") if s]
    spread = [int(s) for s in args.spread_seeds.split(",") if s]
    args.out_dir.mkdir(parents=True, exist_ok=True)
    rows = []
    for seed, variant in _plan(seeds, spread):
        out = args.out_dir / f"{variant}-{seed}.json"
        if not args.summarise_only:
            subprocess.run(_command(seed, variant, out), cwd=ROOT, check=True, stdout=subprocess.DEVNULL)
        if out.exists():
            rows.append(_row(seed, variant, json.loads(out.read_text())))
            print(json.dumps(rows[-1]))
    result = {
        "benchmark": "rl_faults",
        "labels": {"env_steps": "measured", "lambda_time_s": "modelled", "cost_usd": "modelled from price table"},
        "commands": {v: " ".join(_command(0, v, Path("F"))[1:]).replace("--seed 0", "--seed S") for v in
                     [p + v for p in ("", "slots-") for v in VARIANTS]},
        "runs": rows,
        "summary": summarise(rows),
    }
    from core.results import write_json

    write_json(args.json_out, result)
    return 0


if __name__ == "__main__":
    sys.exit(main())
