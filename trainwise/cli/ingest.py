"""`trainwise ingest`: synthetic Criteo data, tuning the DLRM tf.data pipeline, measuring a configuration.

* ``gen-data --rows N --format tsv|tfrecord --out DIR``
* ``tune --data DIR --optimizer NAME --time-budget-s T`` (format detected from DIR)
* ``bench --config FILE`` (a ``tune`` result or a plain JSON knob dict)
* ``cluster --jobs FILE --simulate`` (InTuneX; in :mod:`trainwise.cli.ingest_cluster`)

All input is validated before TensorFlow is imported.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

from core.errors import UserError
from core.json_edge import JsonObject
from optimizers.ingestion_optimizers import INGESTION_OPTIMIZERS
from trainwise.cli import finite_float

FORMATS = ("tsv", "tfrecord")


def _node_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("--vcpus", type=int, default=None, help="the node's vCPUs for the pipeline (default: this machine's)")
    p.add_argument("--ram-gib", type=finite_float, default=None, help="the node's RAM in GiB (default: this machine's)")
    p.add_argument("--hourly-usd", type=finite_float, default=0.0, help="the node's hourly price (for reports)")
    p.add_argument("--on-bad-row", choices=("error", "skip"), default="error",
                   help="a malformed TSV row: stop with an error naming it, or skip it (skipped rows are counted)")


def register(sub: argparse._SubParsersAction) -> None:
    from trainwise.cli import add_json_out

    ingest = sub.add_parser("ingest", help="recommender data ingestion: generate data, tune the tf.data pipeline")
    isub = ingest.add_subparsers(dest="ingest_command", metavar="INGEST_COMMAND")
    isub.required = True

    g = isub.add_parser("gen-data", help="write synthetic Criteo-format shards (deterministic from --seed)")
    g.add_argument("--rows", type=int, required=True, help="total rows")
    g.add_argument("--format", choices=FORMATS, required=True, help="shard format")
    g.add_argument("--out", type=Path, required=True, help="output directory (new or empty)")
    g.add_argument("--shards", type=int, default=None, help="number of shards (default: ~25,000 rows each, >= 4)")
    g.add_argument("--seed", type=int, default=0)
    add_json_out(g)
    g.set_defaults(handler=gen_data_handler)

    t = isub.add_parser("tune", help="find the pipeline configuration that feeds the trainer fastest",
                        description="Search the DLRM pipeline's knobs on this machine with one optimizer; every "
                        "trial is measured live in a worker subprocess, the chosen configuration is re-measured.")
    t.add_argument("--data", type=Path, required=True, help="directory of shards (from gen-data)")
    t.add_argument("--format", choices=FORMATS, default=None, help="shard format (default: detected from --data)")
    t.add_argument("--optimizer", choices=INGESTION_OPTIMIZERS.names(), required=True,
                   help="; ".join(f"{o.name}: {o.description}" for o in INGESTION_OPTIMIZERS.entries()))
    t.add_argument("--time-budget-s", type=finite_float, default=180.0, help="tuning time budget in seconds (default 180)")
    t.add_argument("--max-trials", type=int, default=None, help="stop after this many measured trials")
    t.add_argument("--batch-size", type=int, default=4096, help="the trainer's batch size (default 4096)")
    t.add_argument("--seed", type=int, default=0)
    t.add_argument("--autotune-rounds", type=int, default=5,
                   help="after tuning, measure the pick against tf.data AUTOTUNE in the same worker, interleaved, "
                   "this many rounds (reported as vs_autotune with its interval; 0: skip; default 5)")
    _node_args(t)
    add_json_out(t)
    t.set_defaults(handler=tune_handler)

    b = isub.add_parser("bench", help="measure one pipeline configuration (rows/s, spread, peak RSS)")
    b.add_argument("--config", type=Path, required=True, help="JSON: a `tune` result, or a dict of knob values")
    b.add_argument("--data", type=Path, default=None, help="directory of shards (default: the one in --config)")
    b.add_argument("--format", choices=FORMATS, default=None)
    b.add_argument("--warmup-s", type=finite_float, default=4.0)
    b.add_argument("--window-s", type=finite_float, default=3.0)
    b.add_argument("--repeats", type=int, default=3)
    b.add_argument("--stages", action="store_true", help="also time each prefix of the pipeline (per-stage rows/s)")
    _node_args(b)
    add_json_out(b)
    b.set_defaults(handler=bench_handler)

    from trainwise.cli.ingest_cluster import register_cluster
    from trainwise.cli.ingest_node_speed import register_node_speed

    register_cluster(isub)
    register_node_speed(isub)
    from trainwise.cli.ingest_trainer_demand import register_trainer_demand

    register_trainer_demand(isub)


# ---------------------------------------------------------------------------------------
def _node(args: argparse.Namespace) -> Any:
    from ingestion.node import Node, this_machine

    here = this_machine(args.hourly_usd)
    if args.vcpus is None and args.ram_gib is None:
        return here
    return Node(
        name="custom",
        vcpus=here.vcpus if args.vcpus is None else args.vcpus,
        ram_gib=here.ram_gib if args.ram_gib is None else args.ram_gib,
        hourly_usd=args.hourly_usd,
    )


def _check_bad_rows(data: Path, fmt: str, shards: list[str], policy: str) -> JsonObject:
    """Scan TSV shards for malformed rows first: error names the first one, skip counts them."""
    from ingestion.dlrm import count_bad_rows

    report = count_bad_rows(data, fmt, shards)
    corrupt = report.get("corrupt_files") or []
    if corrupt:  # a damaged TFRecord shard cannot be read past its bad record: never skipped silently
        raise UserError(
            f"{len(corrupt)} corrupt TFRecord shard(s) in {data}, first {corrupt[0]['file']} at record "
            f"{corrupt[0]['record']} ({corrupt[0]['error'].splitlines()[0]}); regenerate or remove it"
        )
    if report["bad_rows"] and policy == "error":
        raise UserError(
            f"{report['bad_rows']} malformed row(s) in {data}, first at {report['first_bad']}; "
            f"fix the data or pass --on-bad-row skip to skip (and count) them"
        )
    if report["bad_rows"]:
        print(f"skipping {report['bad_rows']} malformed row(s) of {report['rows']} (first at {report['first_bad']})",
              file=sys.stderr)
    return report


def gen_data_handler(args: argparse.Namespace) -> JsonObject:
    from ingestion.datagen import generate

    result = generate(args.rows, args.format, args.out, shards=args.shards, seed=args.seed)
    print(f"wrote {result['rows']:,} rows as {result['shards']} {result['format']} shards to {result['out']}",
          file=sys.stderr)
    return result


def _validate_common(args: argparse.Namespace) -> tuple[Path, str, list[str]]:
    """The data folder, its format and its shards, listed once for the whole command."""
    from ingestion.dlrm import list_shards

    shards, fmt = list_shards(args.data, args.format)
    return args.data, fmt, shards


def tune_handler(args: argparse.Namespace) -> JsonObject:
    if args.time_budget_s <= 0:
        raise UserError(f"--time-budget-s must be positive, got {args.time_budget_s}")
    if args.max_trials is not None and args.max_trials < 1:
        raise UserError(f"--max-trials must be at least 1, got {args.max_trials}")
    if args.batch_size < 1:
        raise UserError(f"--batch-size must be at least 1, got {args.batch_size}")
    if args.autotune_rounds < 0:
        raise UserError(f"--autotune-rounds must be 0 (skip) or more, got {args.autotune_rounds}")
    node = _node(args)
    data, fmt, shards = _validate_common(args)
    bad = _check_bad_rows(data, fmt, shards, args.on_bad_row)
    from ingestion.dlrm import dlrm_spec
    from optimizers.tuning import IngestJob, TuningOptions, tune_pipeline

    spec = dlrm_spec(str(data), fmt, node, [args.batch_size], args.on_bad_row, shards=shards)
    print(f"tuning {spec.name} on {node.vcpus} vCPUs with {args.optimizer} (budget {args.time_budget_s:.0f} s)",
          file=sys.stderr)
    job = IngestJob.create(spec, node, time_budget_s=args.time_budget_s, seed=args.seed, max_trials=args.max_trials)
    result = tune_pipeline(job, args.optimizer, TuningOptions(autotune_rounds=args.autotune_rounds)).to_json()
    result.update(data=str(data), format=fmt, rows_checked=bad["rows"], bad_rows=bad["bad_rows"],
                  on_bad_row=args.on_bad_row)
    print(f"{args.optimizer}: {result['rows_per_s']:,.0f} rows/s (measured), peak RSS {result['peak_rss_mb']:,.0f} MB, "
          f"found in {result['tuning_s']:.0f} s: {result['config']}", file=sys.stderr)
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


def _load_config_file(path: Path) -> tuple[dict[str, int], JsonObject]:
    if not path.is_file():
        raise UserError(f"--config {path} does not exist or is not a file")
    try:
        doc = json.loads(path.read_text())
    except ValueError as exc:
        raise UserError(f"--config {path} is not valid JSON: {exc}") from exc
    if not isinstance(doc, dict):
        raise UserError(f"--config {path} must hold a JSON object (a `tune` result or a dict of knob values)")
    config = doc.get("config", doc)
    if not isinstance(config, dict) or not all(isinstance(v, int) and not isinstance(v, bool) for v in config.values()):
        raise UserError(f"--config {path}: the configuration must map knob names to integers, got {config!r}")
    return dict(config), doc


def bench_handler(args: argparse.Namespace) -> JsonObject:
    config, doc = _load_config_file(args.config)
    if args.data is None:
        if "data" not in doc:
            raise UserError(f"--config {args.config} names no data directory; pass --data DIR")
        args.data = Path(doc["data"])
    if args.format is None and doc.get("format") in FORMATS:
        args.format = doc["format"]
    if args.warmup_s < 0 or args.window_s <= 0 or args.repeats < 1:
        raise UserError("--warmup-s must be >= 0, --window-s > 0 and --repeats >= 1")
    node = _node(args)
    data, fmt, shards = _validate_common(args)
    bad = _check_bad_rows(data, fmt, shards, args.on_bad_row)
    from ingestion.dlrm import AUTOTUNE, dlrm_spec
    from ingestion.measure import measure

    spec = dlrm_spec(str(data), fmt, node, [int(config.get("batch_size", 4096))], args.on_bad_row, shards=shards)
    unknown = sorted(set(config) - set(spec.space.names))
    if unknown:
        raise UserError(f"unknown knob(s) {unknown} in --config; the knobs are {spec.space.names}")
    missing = [n for n in spec.space.names if n not in config]
    if missing:
        raise UserError(f"--config lacks knob(s) {missing}; give every knob of {spec.space.names}")
    low = {k: v for k, v in config.items() if v < AUTOTUNE}
    if low:
        raise UserError(f"knob values must be >= -1 (-1 = AUTOTUNE), got {low}")
    m = measure(spec, config, warmup_s=args.warmup_s, window_s=args.window_s, repeats=args.repeats,
                stage_profile=args.stages, memory_limit_mb=node.ram_budget_mb)
    if m.failed:
        raise UserError(f"configuration {config} failed ({m.extra.get('failure')}) within the memory budget "
                        f"{node.ram_budget_mb:,.0f} MB")
    print(f"{m.rows_per_s:,.0f} rows/s (measured, median of {args.repeats}), spread {m.extra['spread']:.1%}, "
          f"peak RSS {m.peak_rss_mb:,.0f} MB", file=sys.stderr)
    return {"config": config, "data": str(data), "format": fmt, "rows_per_s": m.rows_per_s,
            "peak_rss_mb": m.peak_rss_mb, "label": m.label, "measurement": dict(m.extra),
            "in_space": spec.space.is_valid(config), "rows_checked": bad["rows"], "bad_rows": bad["bad_rows"],
            "on_bad_row": args.on_bad_row}
