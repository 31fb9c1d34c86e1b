"""`trainwise ingest tune`: tune the DLRM tf.data pipeline on this machine with one optimizer.

    trainwise ingest tune --data DIR --optimizer NAME [--time-budget-s T] [--max-trials N] \\
        [--batch-size B] [--seed S] [--vcpus V] [--ram-gib R] [--on-bad-row error|skip] \\
        [--autotune-rounds K] --json-out FILE

The request's flags are generated from :class:`~optimizers.ingest_request.IngestRequest`
(``trainwise.cli.model_flags``): one flag per field, its help the field's description, its
check the model's; the command line's own defaults (``--data`` and ``--optimizer`` required,
180 s of budget) are the model's ``flag_defaults``. The data are checked (shards listed, bad
rows counted) before TensorFlow is imported.
"""

from __future__ import annotations

import argparse
import sys
import textwrap
from pathlib import Path
from typing import TYPE_CHECKING

from core.errors import UserError
from core.json_edge import JsonObject

if TYPE_CHECKING:
    from optimizers.ingest_request import IngestRequest

#: The flags of the run, not of the request.
RUN_FLAGS = ("--autotune-rounds", "--json-out")


def register_tune(isub: argparse._SubParsersAction) -> None:
    from optimizers.ingest_request import IngestRequest
    from trainwise.cli import add_json_out
    from trainwise.cli.model_flags import add_request_flags

    t = isub.add_parser("tune", help="find the pipeline configuration that feeds the trainer fastest",
                        description=textwrap.fill("Search the DLRM pipeline's knobs on this machine with one "
                        "optimizer; every trial is measured live in a worker subprocess, the chosen configuration is "
                        "re-measured.", 78, break_on_hyphens=False), epilog=optimizers_epilog(), formatter_class=argparse.RawDescriptionHelpFormatter)
    add_request_flags(t, IngestRequest)
    t.add_argument("--autotune-rounds", type=int, default=5,
                   help="after tuning, measure the pick against tf.data AUTOTUNE in the same worker, interleaved, "
                   "this many rounds (reported as vs_autotune with its interval; 0: skip; default 5)")
    add_json_out(t)
    t.set_defaults(handler=tune_handler)


def optimizers_epilog(width: int = 78) -> str:
    """The optimizers ``--optimizer`` names, each with what it does (from the registry, read now)."""
    from optimizers.ingestion_optimizers import INGESTION_OPTIMIZERS

    names = INGESTION_OPTIMIZERS.names()
    pad = max(map(len, names)) + 4
    lines = ["optimizers:"]
    for name in names:
        text = INGESTION_OPTIMIZERS.get(name).description
        lines += textwrap.wrap(text, width, initial_indent=f"  {name:<{pad - 2}}", subsequent_indent=" " * pad,
                               break_on_hyphens=False)
    return "\n".join(lines)


def build_request(args: argparse.Namespace) -> "IngestRequest":
    """The flags as an ingestion request, checked; errors name the flag."""
    from optimizers.ingest_request import IngestRequest
    from trainwise.cli.model_flags import request_from_flags

    return request_from_flags(IngestRequest, args)


def tune_handler(args: argparse.Namespace) -> JsonObject:
    request = build_request(args)
    if args.autotune_rounds < 0:
        raise UserError(f"--autotune-rounds must be 0 (skip) or more, got {args.autotune_rounds}")
    from ingestion.dlrm import list_shards
    from trainwise.cli.ingest_data import check_bad_rows

    data = Path(str(request.data.path))
    shards, fmt = list_shards(data, request.format)
    bad = check_bad_rows(data, fmt, shards, request.on_bad_row)
    from optimizers.tuning import TuningOptions, tune_pipeline

    job = request.job(str(data), fmt, shards)
    print(f"tuning {job.spec.name} on {job.node.vcpus} vCPUs with {request.optimizer} "
          f"(budget {request.time_budget_s:.0f} s)", file=sys.stderr)
    result = tune_pipeline(job, request.optimizer, TuningOptions(autotune_rounds=args.autotune_rounds)).to_json()
    result.update(data=str(data), format=fmt, rows_checked=bad["rows"], bad_rows=bad["bad_rows"],
                  on_bad_row=request.on_bad_row)
    print(f"{request.optimizer}: {result['rows_per_s']:,.0f} rows/s (measured), peak RSS "
          f"{result['peak_rss_mb']:,.0f} MB, found in {result['tuning_s']:.0f} s: {result['config']}", file=sys.stderr)
    _print_race((result.get("search") or {}).get("race"))
    _print_versus(result.get("vs_autotune"))
    return result


def _print_race(race: JsonObject | None) -> None:
    if not race:
        return
    bound = race.get("buffers_memory_bound") or {}
    print(f"final race: {race['entrants']} finalists, {race['rounds']} side-by-side round(s), decided by "
          f"{race['decided_by']}" + (f"; memory holds these buffers down: {bound}" if bound else ""), file=sys.stderr)


def _print_versus(versus: JsonObject | None) -> None:
    if not versus:
        return
    if versus["vs_autotune"] is None:
        print(f"vs AUTOTUNE: not measured ({versus['error']})", file=sys.stderr)
        return
    print(f"vs AUTOTUNE (same worker, {len(versus['pick_rows_per_s'])} interleaved rounds, measured): "
          f"{versus['vs_autotune']:.2f}x, {versus['confidence']:.0%} interval {versus['low']:.2f}-{versus['high']:.2f}x",
          file=sys.stderr)
