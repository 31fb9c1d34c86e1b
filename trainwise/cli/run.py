"""`trainwise run` (the main job) and `trainwise serve` (deployments with schedules).

``trainwise run --config configs/demo.yaml`` validates the workload file, then runs
the ``optimize`` flow on Prefect's embedded local server (SQLite; no Prefect Cloud,
no AWS) unless ``PREFECT_API_URL`` points at a server, and prints where the report
and plots are.

``trainwise serve`` reads ``prefect.yaml`` and serves its deployments, schedules
included, from this process. Schedules only fire on a real server (the embedded
one runs no scheduler), so serve asks for ``PREFECT_API_URL`` first.
"""

from __future__ import annotations

import argparse
import os
import sys
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any, Iterator

from core.errors import UserError
from core.json_edge import JsonObject

if TYPE_CHECKING:  # pragma: no cover  (Prefect loads only when a flow runs)
    from tasks.report import RunResult

DEFAULT_CONFIG = "configs/demo.yaml"


def register(sub: argparse._SubParsersAction) -> None:
    from trainwise.cli import add_json_out

    run = sub.add_parser(
        "run",
        help="run the optimize flow (Seraph + InTune) on a workload file; the main job",
        description="Run the optimize flow on a workload file and print where the report and plots are.",
    )
    run.add_argument("--config", default=DEFAULT_CONFIG, help=f"workload YAML file (default: {DEFAULT_CONFIG})")
    run.add_argument(
        "--flow",
        choices=("optimize", "seraph", "intune"),
        default="optimize",
        help="which flow to run (default: optimize, both branches)",
    )
    run.add_argument("--refresh-profiles", action="store_true", help="measure profiles afresh even if cached")
    add_json_out(run)
    run.set_defaults(handler=run_handler)

    serve = sub.add_parser(
        "serve",
        help="serve the deployments in prefect.yaml with their schedules (needs a Prefect server)",
        description=(
            "Serve the deployments of prefect.yaml from this process, schedules included. Start a server "
            "first (`prefect server start`) and export PREFECT_API_URL=http://127.0.0.1:4200/api."
        ),
    )
    serve.add_argument("--prefect-file", default="prefect.yaml", help="deployments file (default: prefect.yaml)")
    serve.add_argument("--dry-run", action="store_true", help="load and check the deployments, print them, do not serve")
    add_json_out(serve)
    serve.set_defaults(handler=serve_handler)


_PREFECT_DEFAULTS = {
    "PREFECT_SERVER_ANALYTICS_ENABLED": "false",
    # a generous start-up timeout keeps the embedded server from timing out on a busy
    # 2-core machine (Prefect's default is 20 s)
    "PREFECT_SERVER_EPHEMERAL_STARTUP_TIMEOUT_SECONDS": "120",
    "PREFECT_LOGGING_LOG_PRINTS": "true",
    "MPLBACKEND": "Agg",
    "TF_CPP_MIN_LOG_LEVEL": "2",  # TensorFlow's start-up banners hide the run's log
}


@contextmanager
def prefect_environment() -> Iterator[None]:
    """Settings for an offline laptop run while the command runs; the user's environment wins.

    Each of :data:`_PREFECT_DEFAULTS` is set unless the environment already has it, and an
    empty ``PREFECT_API_URL`` is removed (it means "no server"; Prefect would otherwise try
    to connect to an empty URL). On exit every variable touched is put back as it was, so
    the process's environment is the same after the command as before it.
    """
    touched = ("PREFECT_API_URL", *_PREFECT_DEFAULTS)
    before = {name: os.environ.get(name) for name in touched}
    try:
        if os.environ.get("PREFECT_API_URL") == "":
            del os.environ["PREFECT_API_URL"]
        for name, value in _PREFECT_DEFAULTS.items():
            os.environ.setdefault(name, value)
        yield
    finally:
        for name, value in before.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value


def run_handler(args: argparse.Namespace) -> RunResult:
    from optimizers.spec import load_spec

    need = {"seraph": "rl", "intune": "ingestion"}.get(args.flow)
    load_spec(args.config, need=need)  # fail on a bad file before Prefect starts
    _check_state()
    with prefect_environment():
        server = os.environ.get("PREFECT_API_URL") or "Prefect's embedded local server (SQLite)"
        print(f"trainwise: running the {args.flow} flow on {args.config} via {server}", file=sys.stderr)
        from flows import get_flow

        state = get_flow(args.flow)(config=str(args.config), refresh_profiles=args.refresh_profiles, return_state=True)
        return _result_of(state, args.flow)


def _check_state() -> None:
    """A bad ``TRAINWISE_STATE``, or S3 state without prefect-aws, fails before Prefect starts."""
    from core import state

    s3 = state.s3_state()
    if s3 is not None:
        from tasks.caching import s3_bucket_block

        s3_bucket_block(s3)


def _result_of(state: Any, flow: str) -> RunResult:
    """The flow's result, its summary printed; a failed flow raises, after printing what it reported."""
    if not state.is_completed():
        partial = state.result(raise_on_failure=False)
        if isinstance(partial, dict) and "report" in partial:  # a branch failed; the rest is reported
            _print_summary(partial)
            raise UserError(f"the {flow} flow failed: {state.message}")
        state.result()  # raises the flow's own error (a UserError prints as one line)
    result: RunResult = state.result()
    _print_summary(result)
    return result


def _print_summary(result: RunResult) -> None:
    print()
    print(f"report:  {result['report']}")
    for plot in result.get("plots", []):
        print(f"plot:    {plot}")
    for name, hit in sorted(result.get("profile_cache", {}).items()):
        print(f"profile: {name} {'cached (reused)' if hit else 'measured (not cached)'}")
    print(f"results: {result['run_dir']}")


def serve_handler(args: argparse.Namespace) -> JsonObject:
    with prefect_environment():
        return _serve(args)


def _serve(args: argparse.Namespace) -> JsonObject:
    from flows.deployments import load_deployments

    path = Path(args.prefect_file)
    entries = load_deployments(path)  # validates entrypoints, parameters and schedules
    summary = {
        "prefect_file": str(path),
        "deployments": [
            {"name": e.name, "flow": e.flow.name, "schedules": e.schedule_texts, "concurrency": e.concurrency_text,
             "parameters": e.parameters} for e in entries
        ],
    }
    for d in summary["deployments"]:
        print(f"{d['flow']}/{d['name']}: schedules {d['schedules'] or 'none'}; runs {d['concurrency']}; "
              f"parameters {d['parameters']}")
    if args.dry_run:
        return summary
    if not os.environ.get("PREFECT_API_URL"):
        raise UserError(
            "trainwise serve needs a running Prefect server for its schedules to fire (the embedded one runs no "
            "scheduler). Start one with `prefect server start` and then `export PREFECT_API_URL=http://127.0.0.1:4200/api`; "
            "or use --dry-run to only check the deployments"
        )
    import prefect

    from tasks.measure import ensure_measure_limit

    print(f"measurement limit: {ensure_measure_limit()}", file=sys.stderr)
    prefect.serve(*[e.to_runner_deployment() for e in entries])
    return summary
