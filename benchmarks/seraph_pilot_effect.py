"""What a pilot does to training: env steps to the target after a pilot, against from scratch.

Seraph's pilot is the start of the real run (the run resumes from its checkpoint), so
its shapes are training too. This benchmark trains one shape (the plan) to the target
per seed, from scratch and after each pilot variant, on the local backend, and prints
each variant's env steps over the from-scratch run's on the same seed:

* ``same-shape``: 8 iterations at the plan's own shape, then resume. A check: the
  resume and the noise probes change nothing, so this equals from scratch exactly.
* ``actors-only``: the function count swept 16 -> 1 at the plan's batch (Seraph's pilot
  since stop 14).
* ``batch-only``: the plan's function count, the earlier pilot's batch sweep.
* ``earlier-pilot``: the pilot up to stop 13, which swept the function count and the
  batch (2s, 2s, 4s, s, 2s, s, s, 2s for the smallest searched batch s).

``--steps-per-env N`` trains every variant with env slots (default 0: one env per
function, as the figures in docs/seraph.md were measured; the tuner's default since
stop 15 is slots of 128 steps). Env steps are counted, not timed, so the figures do not
depend on the machine's load; the run is still long enough to take the bench lock.

    flock /tmp/trainwise-bench.lock .venv/bin/python benchmarks/seraph_pilot_effect.py \\
        --env CartPole-v1 --seeds 3,4,5,6,7,8,9,10,11,12 --json-out benchmarks/results/seraph-pilot-effect.json
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
from dataclasses import replace
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

TARGETS = {"CartPole-v1": 475.0, "LunarLander-v3": 200.0}
PLAN = {"CartPole-v1": (4, 1769, 1024), "LunarLander-v3": (4, 1769, 2048)}
# the batches of the pilot until stop 13, as multiples of the smallest searched batch
EARLIER_BATCH_FACTORS = (2, 2, 4, 1, 2, 1, 1, 2)


def variants(plan: Any, small: int, steps_per_env: int = 0) -> dict[str, list[Any] | None]:
    from optimizers.seraph.models import RunShape
    from optimizers.seraph.profiling import PILOT_ACTORS, pilot_schedule

    a, m = plan.actors, plan.memory_mb
    return {
        "scratch": None,
        "same-shape": [plan] * len(PILOT_ACTORS),
        "actors-only": pilot_schedule(plan.batch, steps_per_env),  # the tuner's own pilot (at 1,769 MB, the plans' memory)
        "batch-only": [RunShape(a, m, f * small) for f in EARLIER_BATCH_FACTORS],
        "earlier-pilot": [RunShape(n, m, f * small) for n, f in zip(PILOT_ACTORS, EARLIER_BATCH_FACTORS)],
    }


def steps_to_target(env: str, seed: int, plan: Any, pilot: list[Any] | None, steps_per_env: int = 0) -> int:
    """Env steps to the target at ``plan``, after ``pilot`` (resumed from its checkpoint)."""
    from optimizers.baselines.rl_common import _spec
    from optimizers.seraph.profiling import SweepController, workload_for
    from optimizers.seraph.tuner import _point_checkpoint_at
    from serverless.backends import make_backend
    from serverless.trainer import RunConfig, train

    workload = workload_for(env, None, steps_per_env=steps_per_env)

    def run(shape: Any) -> Any:
        return RunConfig(actors=shape.actors, memory_mb=shape.memory_mb, batch=shape.batch)

    def spec(shape: Any, target: float, max_steps: int, ckpt: Path | None, resume: bool = False) -> Any:
        # the baselines' spec (the tuner's learning-rate schedule), with a checkpoint for the resume
        base = _spec(workload, shape, target_reward=target, seed=seed, max_steps=max_steps, backend="local")
        return replace(base, checkpoint_every=10**9 if ckpt else 0, checkpoint_dir=ckpt, resume=resume)

    backend = make_backend("local")  # one backend: after the pilot the functions stay warm, as in the tuner
    try:
        with tempfile.TemporaryDirectory() as tmp:
            ckpt = Path(tmp) / "checkpoint"
            if pilot is None:
                return train(spec(plan, TARGETS[env], workload.max_steps, None), backend=backend,
                             probe_noise_every=2, progress=False).env_steps
            train(spec(pilot[0], 1e30, sum(s.batch for s in pilot), ckpt), backend=backend,
                  controller=SweepController(pilot, run), probe_noise_every=1, progress=False)
            _point_checkpoint_at(ckpt, plan)
            return train(spec(plan, TARGETS[env], workload.max_steps, ckpt, resume=True), backend=backend,
                         probe_noise_every=2, progress=False).env_steps
    finally:
        backend.close()


def main(argv: list[str] | None = None) -> int:
    from optimizers.seraph.models import RunShape
    from optimizers.seraph.profiling import batches_for, workload_for

    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--env", default="CartPole-v1", choices=sorted(TARGETS))
    ap.add_argument("--seeds", default="3,4,5,6,7,8,9,10,11,12")
    ap.add_argument("--variants", default=None, help="comma-separated subset (default: all)")
    ap.add_argument("--steps-per-env", type=int, default=0, help="env slots of about N steps (default 0: one env per function)")
    ap.add_argument("--json-out", type=Path, default=None)
    args = ap.parse_args(argv)
    if args.steps_per_env < 0:
        ap.error(f"--steps-per-env must be >= 0 (0 = one env per function), got {args.steps_per_env}")
    try:
        seeds = [int(s) for s in args.seeds.split(",") if s]
    except ValueError:
        ap.error(f"--seeds must be comma-separated integers, got {args.seeds!r}")
    plan = RunShape(*PLAN[args.env])
    everything = variants(plan, min(batches_for(workload_for(args.env, None))), args.steps_per_env)
    chosen = list(everything) if args.variants is None else [v for v in args.variants.split(",") if v]
    unknown = [v for v in chosen if v not in everything]
    if unknown:
        ap.error(f"unknown variant(s) {unknown}; allowed: {', '.join(everything)}")
    if "scratch" not in chosen:
        chosen.insert(0, "scratch")
    steps: dict[str, list[int]] = {v: [] for v in chosen}
    for seed in seeds:
        for name in chosen:
            steps[name].append(steps_to_target(args.env, seed, plan, everything[name], args.steps_per_env))
            print(f"seed {seed} {name:<14} {steps[name][-1]:>8} env steps", file=sys.stderr, flush=True)
    summary = {}
    for name in chosen:
        ratios = [s / b for s, b in zip(steps[name], steps["scratch"])]
        summary[name] = {
            "median_env_steps": statistics.median(steps[name]),
            "median_ratio_to_scratch": statistics.median(ratios),
            "seeds_worse_than_scratch": sum(r > 1 for r in ratios),
        }
    print(f"{args.env}, plan {plan.actors} x {plan.memory_mb} MB x {plan.batch}, seeds {args.seeds} (env steps: counted)")
    print(f"{'variant':<14} {'median steps':>12} {'median ratio':>13} {'seeds worse':>12}")
    for name, row in summary.items():
        print(f"{name:<14} {row['median_env_steps']:>12.0f} {row['median_ratio_to_scratch']:>13.2f} "
              f"{row['seeds_worse_than_scratch']:>8} of {len(seeds)}")
    if args.json_out:
        from core.results import write_json

        write_json(args.json_out, {"benchmark": "seraph_pilot_effect", "env": args.env, "plan": plan.as_dict(),
                                   "steps_per_env": args.steps_per_env,
                                   "seeds": seeds, "env_steps": steps, "summary": summary,
                                   "label": "env steps counted (no timing)"})
        print(f"result written to {args.json_out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
