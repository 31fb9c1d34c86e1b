"""`trainwise ingest`: synthetic Criteo data, tuning the DLRM tf.data pipeline, measuring a configuration.

* ``gen-data --rows N --format tsv|tfrecord --out DIR``
* ``tune --data DIR --optimizer NAME --time-budget-s T`` (format detected from DIR; in
  :mod:`trainwise.cli.ingest_tune`, its flags generated from the ingestion request)
* ``bench --config FILE`` (a ``tune`` result or a plain JSON knob dict)
* ``cluster --jobs FILE --simulate`` (InTuneX; in :mod:`trainwise.cli.ingest_cluster`)

All input is validated before TensorFlow is imported.
"""

from __future__ import annotations

import argparse
import json
import sys
import typing
from pathlib import Path

from core.errors import UserError
from core.json_edge import JsonObject
from optimizers.ingest_request import Format
from trainwise.cli import finite_float

FORMATS: tuple[str, ...] = typing.get_args(Format)
#: The ingestion request's fields ``bench`` takes too: the shards' format and the node, generated from the model.
BENCH_REQUEST_FIELDS = ("format", "vcpus", "ram_gib", "hourly_usd", "on_bad_row")


def register(sub: argparse._SubParsersAction) -> None:
    from optimizers.ingest_request import IngestRequest
    from trainwise.cli import add_json_out
    from trainwise.cli.model_flags import add_request_flags

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

    from trainwise.cli.ingest_tune import register_tune

    register_tune(isub)

    b = isub.add_parser("bench", help="measure one pipeline configuration (rows/s, spread, peak RSS)")
    b.add_argument("--config", type=Path, required=True, help="JSON: a `tune` result, or a dict of knob values")
    b.add_argument("--data", type=Path, default=None, dest="folder",  # not the request's `data`
                   help="directory of shards (default: the one in --config)")
    b.add_argument("--warmup-s", type=finite_float, default=4.0)
    b.add_argument("--window-s", type=finite_float, default=3.0)
    b.add_argument("--repeats", type=int, default=3)
    b.add_argument("--stages", action="store_true", help="also time each prefix of the pipeline (per-stage rows/s)")
    add_request_flags(b, IngestRequest, only=BENCH_REQUEST_FIELDS)
    add_json_out(b)
    b.set_defaults(handler=bench_handler)

    from trainwise.cli.ingest_cluster import register_cluster
    from trainwise.cli.ingest_node_speed import register_node_speed

    register_cluster(isub)
    register_node_speed(isub)
    from trainwise.cli.ingest_trainer_demand import register_trainer_demand

    register_trainer_demand(isub)


# ---------------------------------------------------------------------------------------
def gen_data_handler(args: argparse.Namespace) -> JsonObject:
    from ingestion.datagen import generate

    result = generate(args.rows, args.format, args.out, shards=args.shards, seed=args.seed)
    print(f"wrote {result['rows']:,} rows as {result['shards']} {result['format']} shards to {result['out']}",
          file=sys.stderr)
    return result


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
    from optimizers.ingest_request import IngestRequest
    from ingestion.dlrm import list_shards
    from trainwise.cli.ingest_data import check_bad_rows
    from trainwise.cli.model_flags import request_from_flags

    config, doc = _load_config_file(args.config)
    data = args.folder
    if data is None:
        if "data" not in doc:
            raise UserError(f"--config {args.config} names no data directory; pass --data DIR")
        data = Path(doc["data"])
    if args.warmup_s < 0 or args.window_s <= 0 or args.repeats < 1:
        raise UserError("--warmup-s must be >= 0, --window-s > 0 and --repeats >= 1")
    # the node, the format and the bad-row policy, checked as a request's; the batch size is the configuration's
    request = request_from_flags(IngestRequest, args, {"batch_size": "--config's batch_size"},
                                 batch_size=config.get("batch_size", 4096))
    node = request.node()
    shards, fmt = list_shards(data, request.format or (doc["format"] if doc.get("format") in FORMATS else None))
    bad = check_bad_rows(data, fmt, shards, request.on_bad_row)
    from ingestion.dlrm import AUTOTUNE
    from ingestion.measure import measure

    spec = request.pipeline(str(data), fmt, shards, node)
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
            "on_bad_row": request.on_bad_row}
