"""`trainwise rl tune` (Seraph): profile, plan, then train with dynamic re-tuning.

    trainwise rl tune --env CartPole-v1 --target-reward 475 --objective cost \\
        [--weight W] [--deadline-s D] [--budget-usd B] --backend local|ray [--seed N] \\
        [--plan-only] [--png FILE] --json-out FILE

The JSON holds ``plan`` (chosen configuration, predicted figures, Pareto front),
``phases`` (per phase: configuration, predicted vs measured time and cost) and
``achieved`` (``reached``, ``wall_s``, ``lambda_time_s``, ``cost_usd``).
All input is validated before any profiling starts.
"""

from __future__ import annotations

import argparse
import math
import sys
from pathlib import Path
from typing import Any

from core.errors import UserError

# optimizers.seraph.profiling.DEFAULT_STEPS_PER_ENV, named here without importing the tuner
# (a test checks that the two agree)
STEPS_PER_ENV_HELP_DEFAULT = 128

BACKENDS = ("local", "ray")
ARCHITECTURES = ("x86_64", "arm64")


def _positive(name: str, value: float | None) -> None:
    if value is not None and not (math.isfinite(value) and value > 0):
        raise UserError(f"{name} must be a positive number, got {value}")


def register(rl_sub: argparse._SubParsersAction) -> None:
    from trainwise.cli import add_json_out

    p = rl_sub.add_parser(
        "tune",
        help="Seraph: choose (and re-choose) actor functions, memory and batch to reach a reward cheaply or fast",
        description=__doc__.split("\n\n")[0],
    )
    p.add_argument("--env", required=True, help="gymnasium env id, e.g. CartPole-v1, LunarLander-v3")
    p.add_argument("--target-reward", required=True, type=float, help="mean recent episode return to reach")
    p.add_argument("--objective", required=True, help="cost | speed | balanced (Lambda Power Tuning's names)")
    p.add_argument("--weight", type=float, default=0.5, help="balanced only: weight of cost in [0, 1] (default 0.5)")
    p.add_argument("--deadline-s", type=float, default=None, help="modelled time to target must not exceed this")
    p.add_argument("--budget-usd", type=float, default=None, help="modelled cost to target must not exceed this")
    p.add_argument("--backend", default="local", help="function backend: local | ray (default local)")
    p.add_argument("--architecture", default="x86_64", help="Lambda architecture priced: x86_64 | arm64")
    p.add_argument("--seed", type=int, default=0, help="training seed (default 0)")
    p.add_argument("--max-steps", type=int, default=None, help="env-step cap for training (default: generous per env)")
    p.add_argument("--steps-per-env", type=int, default=None,
                   help="split each batch into envs of about N steps, so the actor count does not change learning "
                   f"(default {STEPS_PER_ENV_HELP_DEFAULT}, the tuner's; 0: one env per actor)")
    p.add_argument("--replan-every", type=int, default=3, help="re-plan every K iterations (default 3)")
    p.add_argument("--no-retune", action="store_true", help="keep the initial plan for the whole run")
    p.add_argument("--reprofile", action="store_true", help="ignore a cached profile and profile again")
    p.add_argument("--plan-only", action="store_true", help="print the plan and the predicted Pareto front; do not train")
    p.add_argument("--png", type=Path, default=None, help="where to draw the Pareto front (default: next to --json-out)")
    add_json_out(p)
    p.set_defaults(handler=handle)


def validate(args: argparse.Namespace) -> None:
    from optimizers.seraph.search import Constraints, Objective

    Objective(args.objective, args.weight)
    Constraints(args.deadline_s, args.budget_usd)
    if args.backend not in BACKENDS:
        raise UserError(f"--backend {args.backend!r} is not known; allowed: {', '.join(BACKENDS)}")
    if args.architecture not in ARCHITECTURES:
        raise UserError(f"--architecture {args.architecture!r} is not known; allowed: {', '.join(ARCHITECTURES)}")
    if not math.isfinite(args.target_reward):
        raise UserError(f"--target-reward must be a finite number, got {args.target_reward}")
    if args.max_steps is not None and args.max_steps < 1000:
        raise UserError(f"--max-steps must be at least 1000 env steps, got {args.max_steps}")
    if args.replan_every < 1:
        raise UserError(f"--replan-every must be >= 1 iteration, got {args.replan_every}")
    if args.steps_per_env is not None and args.steps_per_env < 0:
        raise UserError(f"--steps-per-env must be >= 0 (0 = one env per actor), got {args.steps_per_env}")
    if args.seed < 0:
        raise UserError(f"--seed must be >= 0, got {args.seed}")
    from serverless.envs import inspect_env

    inspect_env(args.env)  # unknown or unsupported env: a UserError naming what is allowed


def _print_plan(plan: dict[str, Any]) -> None:
    out = sys.stderr
    print(f"Seraph plan ({plan['objective']}): {plan['message']}", file=out)
    pred = plan.get("predicted")
    if pred:
        print(
            f"  predicted (modelled): {pred['iterations']} iterations, {pred['env_steps']} env steps, "
            f"{pred['time_s']:.1f} s, ${pred['cost_usd']:.5f}",
            file=out,
        )
    print("  Pareto front (modelled time s, cost USD):", file=out)
    for c in plan["pareto_front"]:
        print(
            f"    {c['actors']:>4} actors x {c['memory_mb']:>5} MB, batch {c['batch']:>5}: "
            f"{c['predicted_time_s']:9.1f} s  ${c['predicted_cost_usd']:.5f}",
            file=out,
        )


def handle(args: argparse.Namespace) -> dict[str, Any]:
    validate(args)
    from optimizers.seraph import tune_and_train
    from optimizers.seraph.profiling import DEFAULT_STEPS_PER_ENV

    png = args.png
    if png is None and args.json_out is not None:
        png = Path(args.json_out).with_suffix(".pareto.png")
    result = tune_and_train(
        env_id=args.env,
        target_reward=args.target_reward,
        objective=args.objective,
        weight=args.weight,
        deadline_s=args.deadline_s,
        budget_usd=args.budget_usd,
        backend=args.backend,
        architecture=args.architecture,
        seed=args.seed,
        max_steps=args.max_steps,
        replan_every=args.replan_every,
        retune=not args.no_retune,
        steps_per_env=DEFAULT_STEPS_PER_ENV if args.steps_per_env is None else args.steps_per_env,
        reprofile=args.reprofile,
        plan_only=args.plan_only,
        png_path=png,
        progress=True,
    )
    _print_plan(result["plan"])
    if not result["plan"]["feasible"] and not args.plan_only:
        raise UserError(result["plan"]["message"])
    if "achieved" in result:
        a = result["achieved"]
        print(
            f"achieved: reached={a['reached']} in {a['env_steps']} env steps; modelled Lambda time "
            f"{a['lambda_time_s']:.1f} s, modelled cost ${a['cost_usd']:.5f}; measured local wall {a['wall_s']:.1f} s",
            file=sys.stderr,
        )
    return result
