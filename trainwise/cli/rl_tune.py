"""`trainwise rl tune` (Seraph): profile, plan, then train with dynamic re-tuning.

    trainwise rl tune --env CartPole-v1 --target-reward 475 [--objective cost|speed|balanced] \\
        [--weight W] [--deadline-s D] [--budget-usd B] [--seed N] \\
        [--backend local|ray|lambda] [--lambda-config FILE] [--plan-only] [--png FILE] --json-out FILE

The request's flags are generated from :class:`~optimizers.seraph.request.SeraphRequest`
(``trainwise.cli.model_flags``): one flag per field, its help the field's description. The
JSON holds ``plan`` (chosen configuration, predicted figures, Pareto front), ``phases`` (per
phase: configuration, predicted vs measured time and cost) and ``achieved`` (``reached``,
``wall_s``, ``lambda_time_s``, ``cost_usd``). All input is validated before any profiling starts.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

from core.errors import UserError
from core.json_edge import JsonObject
from serverless.backends import tunable_backends
from trainwise.cli import backend_options_of

if TYPE_CHECKING:
    from optimizers.seraph.request import SeraphRequest

#: The request fields no flag of their own sets: the backend's options come from the flags
#: each backend declares (``--lambda-config``), named in an error by ``--backend``.
SET_OTHERWISE = {"backend_options": "--backend"}
#: The request fields a command that runs one request per seed sets itself.
PER_RUN = ("seed", "faults")
#: The flags of the run, not of the request.
RUN_FLAGS = ("--reprofile", "--plan-only", "--png", "--write-tfvars", "--json-out")


def register(rl_sub: argparse._SubParsersAction) -> None:
    from optimizers.seraph.request import SeraphRequest
    from trainwise.cli import add_json_out
    from trainwise.cli.model_flags import add_request_flags

    p = rl_sub.add_parser(
        "tune",
        help="Seraph: choose (and re-choose) actor functions, memory and batch to reach a reward cheaply or fast",
        description=__doc__.split("\n\n")[0],
    )
    add_request_args(p)
    add_request_flags(p, SeraphRequest, only=PER_RUN)
    p.add_argument("--reprofile", action="store_true", help="ignore a cached profile and profile again")
    p.add_argument("--plan-only", action="store_true", help="print the plan and the predicted Pareto front; do not train")
    p.add_argument("--png", type=Path, default=None, help="where to draw the Pareto front (default: next to --json-out)")
    p.add_argument("--write-tfvars", type=Path, default=None, metavar="FILE",
                   help="write the planned learner machine as Terraform variables for infra/terraform/envs/dev")
    add_json_out(p)
    p.set_defaults(handler=handle)


def add_request_args(p: argparse.ArgumentParser) -> None:
    """The flags of a Seraph request but :data:`PER_RUN`'s, generated from
    :class:`~optimizers.seraph.request.SeraphRequest`, and each backend's options."""
    from optimizers.seraph.request import SeraphRequest
    from trainwise.cli import add_backend_options
    from trainwise.cli.model_flags import add_request_flags

    add_request_flags(p, SeraphRequest, skip=(*SET_OTHERWISE, *PER_RUN))
    add_backend_options(p, tunable_backends())


def build_request(args: argparse.Namespace) -> "SeraphRequest":
    """The flags as a Seraph request, checked (env included); errors name the flag."""
    from optimizers.seraph.request import RequestError, SeraphRequest
    from trainwise.cli.model_flags import request_from_flags

    backend = getattr(args, "backend", SeraphRequest.model_fields["backend"].default)
    request = request_from_flags(SeraphRequest, args, SET_OTHERWISE, backend_options=backend_options_of(args, backend))
    try:
        request.check_env()  # unknown or unsupported env: an error naming what is allowed
    except RequestError as exc:
        raise exc.named(SeraphRequest.renames.flag(exc.field)) from None
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
    if planned.learner is not None:
        print(f"  learner machine: {planned.learner.reason}", file=out)
        print(f"  learner threads: {planned.learner.threads_line()}", file=out)
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


def handle(args: argparse.Namespace) -> JsonObject:
    request = build_request(args)
    from optimizers.seraph import SeraphJob, tune_and_train

    png = args.png
    if png is None and args.json_out is not None:
        png = Path(args.json_out).with_suffix(".pareto.png")
    job = SeraphJob.of(request)
    if args.plan_only:
        result = tune_and_train(job, reprofile=args.reprofile, plan_only=True, png_path=png, progress=True)
        _print_plan(result.planned)
        _write_tfvars(args.write_tfvars, result.planned.learner)
        return result.to_dict()
    from optimizers.seraph.learning import decide, history_of, run_job

    history = history_of(job)
    choice = decide(job, history)
    outcome = run_job(job, choice, history, source="rl tune", reprofile=args.reprofile, png_path=png, progress=True)
    print(f"history: {history.key.describe()}: {choice.history_runs} earlier run(s); "
          f"this run: {choice.name} ({choice.reason})", file=sys.stderr)
    if outcome.tuned is not None:
        _print_tuned(outcome.tuned)
    else:
        print(f"  learner machine: {outcome.result['plan']['learner']['reason']}", file=sys.stderr)
        if outcome.learner is not None:
            print(f"  learner threads: {outcome.learner.threads_line()}", file=sys.stderr)
        for line in outcome.result["plan"]["race"]:
            print(f"  {line}", file=sys.stderr)
    _write_tfvars(args.write_tfvars, outcome.learner)
    a = outcome.result.get("achieved")
    if a is not None:
        print(
            f"achieved: reached={a['reached']} in {a['env_steps']} env steps; Lambda time {a['lambda_time_s']:.1f} s "
            f"({a['lambda_time_label']}), cost ${a['cost_usd']:.5f} ({a['cost_label']}); measured local wall "
            f"{a['wall_s']:.1f} s",
            file=sys.stderr,
        )
    return outcome.result


def _write_tfvars(path: Path | None, learner: Any) -> None:
    """``--write-tfvars``: the learner machine as ``infra/terraform/envs/dev``'s variable (atomically)."""
    if path is None or learner is None:
        return
    from core.results import write_text

    write_text(path, f"# trainwise rl tune: the planned learner machine ({learner.reason})\n" + learner.tfvars())
    print(f"learner machine written to {path}", file=sys.stderr)


def _print_tuned(result: Any) -> None:
    """The tuner's own run: its plan, and its online layout decisions with their evidence."""
    _print_plan(result.planned)
    if not result.planned.feasible:
        raise UserError(result.planned.message)
    for d in result.run.layout_decisions:
        print(f"  layout at iteration {d.iteration}: {d.action}: {d.reason}", file=sys.stderr)
