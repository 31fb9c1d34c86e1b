"""`trainwise rl tune` (Seraph): profile, plan, then train with dynamic re-tuning.

    trainwise rl tune --env CartPole-v1 --target-reward 475 --objective cost \\
        [--weight W] [--deadline-s D] [--budget-usd B] [--seed N] \\
        [--backend local|ray|lambda] [--lambda-config FILE] [--plan-only] [--png FILE] --json-out FILE

The JSON holds ``plan`` (chosen configuration, predicted figures, Pareto front),
``phases`` (per phase: configuration, predicted vs measured time and cost) and
``achieved`` (``reached``, ``wall_s``, ``lambda_time_s``, ``cost_usd``).
All input is validated before any profiling starts.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

from core.errors import UserError
from serverless.architectures import ARCHITECTURES, DEFAULT_ARCHITECTURE
from serverless.backends import tunable_backends
from trainwise.cli import backend_options_of, finite_float


def register(rl_sub: argparse._SubParsersAction) -> None:
    from optimizers.seraph.objectives import OBJECTIVES
    from optimizers.seraph.defaults import DEFAULT_STEPS_PER_ENV
    from trainwise.cli import add_backend_options, add_env_args, add_inject_faults, add_json_out

    p = rl_sub.add_parser(
        "tune",
        help="Seraph: choose (and re-choose) actor functions, memory and batch to reach a reward cheaply or fast",
        description=__doc__.split("\n\n")[0],
    )
    add_env_args(p)
    p.add_argument("--target-reward", required=True, type=finite_float, help="mean recent episode return to reach")
    p.add_argument("--objective", required=True, metavar="OBJECTIVE",
                   help=f"{' | '.join(OBJECTIVES.names())} (Lambda Power Tuning's names)")
    p.add_argument("--weight", type=finite_float, default=0.5, help="balanced only: weight of cost in [0, 1] (default 0.5)")
    p.add_argument("--deadline-s", type=finite_float, default=None, help="modelled time to target must not exceed this")
    p.add_argument("--budget-usd", type=finite_float, default=None, help="modelled cost to target must not exceed this")
    p.add_argument("--backend", default="local",
                   help=f"function backend: {' | '.join(tunable_backends())} (default local)")
    add_backend_options(p, tunable_backends())
    p.add_argument("--architecture", default=DEFAULT_ARCHITECTURE,
                   help=f"Lambda architecture priced: {' | '.join(ARCHITECTURES)} (default {DEFAULT_ARCHITECTURE})")
    p.add_argument("--seed", type=int, default=0, help="training seed (default 0)")
    p.add_argument("--max-steps", type=int, default=None, help="env-step cap for training (default: generous per env)")
    p.add_argument("--steps-per-env", type=int, default=None,
                   help="fix the rollout layout: envs of about N steps each, so the actor count does not change "
                   f"learning (0: one env per actor; default: Seraph chooses between the baseline's layout and "
                   f"{DEFAULT_STEPS_PER_ENV})")
    p.add_argument("--baseline-config", default=None, metavar="CONFIG",
                   help="the configuration you would otherwise run, always a candidate: "
                   "'actors=A,memory=M,batch=B[,steps_per_env=N]' (default: the static default, "
                   "actors=2,memory=1769,batch=4000,steps_per_env=2000)")
    p.add_argument("--replan-every", type=int, default=3, help="re-plan every K iterations (default 3)")
    p.add_argument("--no-retune", action="store_true", help="keep the initial plan for the whole run")
    p.add_argument("--reprofile", action="store_true", help="ignore a cached profile and profile again")
    p.add_argument("--plan-only", action="store_true", help="print the plan and the predicted Pareto front; do not train")
    p.add_argument("--png", type=Path, default=None, help="where to draw the Pareto front (default: next to --json-out)")
    add_inject_faults(p)
    add_json_out(p)
    p.set_defaults(handler=handle)


#: The flag that sets each request field, where it is not ``--`` + the field with dashes.
FLAGS = {"env_id": "--env", "env_kwargs": "--env-kwargs", "retune": "--no-retune", "faults": "--inject-faults"}


def build_request(args: argparse.Namespace) -> Any:
    """The flags as a Seraph request, checked (env included); errors name the flag."""
    from optimizers.seraph.request import RequestError, SeraphRequest, parse_baseline_config, parse_faults
    from serverless.envs import parse_env_kwargs

    try:
        extra = {} if args.baseline_config is None else {"baseline_config": parse_baseline_config(args.baseline_config)}
        request = SeraphRequest(
            env_id=args.env, target_reward=args.target_reward, objective=args.objective, weight=args.weight,
            deadline_s=args.deadline_s, budget_usd=args.budget_usd, backend=args.backend,
            architecture=args.architecture, seed=args.seed, max_steps=args.max_steps, steps_per_env=args.steps_per_env,
            replan_every=args.replan_every, retune=not args.no_retune, faults=parse_faults(args.inject_faults),
            env_kwargs=parse_env_kwargs(args.env_kwargs), backend_options=backend_options_of(args), **extra,
        )
        request.check_env()  # unknown or unsupported env: an error naming what is allowed
    except RequestError as exc:
        raise exc.named(FLAGS.get(exc.field, "--" + exc.field.replace("_", "-"))) from None
    return request


def _print_plan(planned: Any) -> None:
    """The plan on stderr: the chosen shape and why, predicted figures, the Pareto front."""
    out = sys.stderr
    plan = planned.plan
    print(f"Seraph plan ({plan.objective.name}): {planned.message}", file=out)
    layout = planned.job.layout
    if layout.references == "none":
        print("  references: none (no measured reference runs for this env: planning from the pilot alone)", file=out)
    print(f"  layout: {layout.reason}", file=out)
    for warning in planned.job.prices.warnings:
        print(f"  warning: prices: {warning}", file=out)
    if plan.verdict is not None:
        print(f"  baseline: {plan.verdict.chosen} ({plan.verdict.reason})", file=out)
    best = plan.outcome.best
    if best is not None:
        print(
            f"  predicted (modelled): {best.iterations} iterations, {best.env_steps} env steps, "
            f"{best.time_s:.1f} s, ${best.cost_usd:.5f}",
            file=out,
        )
    print("  Pareto front (modelled time s, cost USD):", file=out)
    for c in plan.outcome.front:
        s = c.shape
        print(
            f"    {s.actors:>4} actors x {s.memory_mb:>5} MB, batch {s.batch:>5}: "
            f"{c.time_s:9.1f} s  ${c.cost_usd:.5f}",
            file=out,
        )


def handle(args: argparse.Namespace) -> dict[str, Any]:
    request = build_request(args)
    from optimizers.seraph import SeraphJob, tune_and_train

    png = args.png
    if png is None and args.json_out is not None:
        png = Path(args.json_out).with_suffix(".pareto.png")
    job = SeraphJob.of(request)
    result = tune_and_train(job, reprofile=args.reprofile, plan_only=args.plan_only, png_path=png, progress=True)
    _print_plan(result.planned)
    if not result.planned.feasible and not args.plan_only:
        raise UserError(result.planned.message)
    if result.achieved is not None:
        a = result.achieved
        print(
            f"achieved: reached={a.reached} in {a.env_steps} env steps; Lambda time {a.lambda_time_s:.1f} s "
            f"({a.lambda_time_label}), cost ${a.cost_usd:.5f} ({a.cost_label}); measured local wall {a.wall_s:.1f} s",
            file=sys.stderr,
        )
        for d in result.run.layout_decisions:  # the online layout decisions, with their evidence
            print(f"  layout at iteration {d.iteration}: {d.action}: {d.reason}", file=sys.stderr)
    return result.to_dict()
