"""The built-in DLRM ingestion pipeline in tf.data, with every knob explicit.

Stages, in order (each stage is a small function below, so a user can reuse them):

1. ``read``: list the shards, then ``interleave`` a ``TextLineDataset`` (TSV) or
   ``TFRecordDataset`` (TFRecord) per shard: knobs ``cycle_length`` and
   ``read_parallelism``; the file list repeats, so the stream is endless.
2. ``shuffle``: shuffle raw records (``shuffle_buffer`` records; 0 = off). Shuffling
   the undecoded record is equivalent to shuffling decoded rows and holds less memory.
3. ``batch``: ``batch_size`` records, ``drop_remainder=True`` (DLRM trainers want a
   fixed batch shape).
4. ``parse``: decode a batch: ``tf.io.decode_csv`` (TSV) or ``tf.io.parse_example``
   (TFRecord): knob ``parse_parallelism``.
5. ``transform``: fill missing values, ``log(x + 1)`` on dense features, hash each
   categorical hex id into its embedding table (``1 + id mod (size - 1)``, 0 = missing),
   optional bucketization of dense features: knob ``transform_parallelism``.
6. ``prefetch``: ``prefetch_buffer`` batches.

Decoding happens per batch rather than per row because that is what production DLRM
input pipelines do (the ops are vectorised; a per-row ``map`` pays tf.data's per-element
overhead 40 times per row). The stage order in the issue text (parse -> transform ->
shuffle -> batch) is thus realised as shuffle records -> batch -> parse -> transform,
which yields the same rows.

Parallelism knobs count threads that the stage may run at once. A value of 0 means
"sequential": the stage runs inline in the thread that pulls from it (tf.data's
behaviour for ``num_parallel_calls=None``), so it claims no core of its own. The
pipeline runs on a private thread pool of ``threadpool`` threads (the node's CPU budget
for ingestion). ``AUTOTUNE`` (-1) is accepted for every parallelism and buffer knob so
that the real tf.data AUTOTUNE baseline runs the very same pipeline.
"""

from __future__ import annotations

import json
import os
from dataclasses import asdict
from pathlib import Path
from typing import TYPE_CHECKING, Any, Mapping, NotRequired, Sequence, TypedDict

from ingestion.datagen import CAT_NAMES, DENSE_NAMES, EXTENSIONS, FORMATS, MANIFEST, NUM_CAT, NUM_DENSE
from ingestion.knobs import Config, Knob, KnobSpace
from ingestion.node import Node, NodeFields, node_of
from core.errors import UserError

if TYPE_CHECKING:  # pragma: no cover
    import tensorflow as tf

    from ingestion.pipeline import PipelineSpec

AUTOTUNE = -1  # tf.data.AUTOTUNE's value; kept here so this module imports without TF
STAGES = ("read", "shuffle", "batch", "parse", "transform", "prefetch")
DEFAULT_TABLE_SIZES = (10, 16, 25, 40, 63, 100, 158, 251, 398, 631, 1000, 1585, 2512, 3981, 6310,
                       10000, 15849, 25119, 39811, 63096, 100000, 158489, 251189, 398107, 630957, 1000000)
DEFAULT_BUCKET_BOUNDARIES = (0.5, 1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 8.0, 10.0)  # in log(x + 1) units
BAD_ROW_POLICIES = ("skip", "error")


# ---------------------------------------------------------------------------------------
# Data directory
# ---------------------------------------------------------------------------------------
def detect_format(data_dir: str | os.PathLike[str]) -> str:
    """The shard format of ``data_dir``: from its manifest, else from the file suffixes."""
    d = Path(data_dir)
    manifest = d / MANIFEST
    if manifest.is_file():
        try:
            fmt = json.loads(manifest.read_text()).get("format")
        except (OSError, ValueError) as exc:
            raise UserError(f"{manifest} is not valid JSON ({exc}); regenerate the data or delete the manifest") from exc
        if fmt in FORMATS:
            return str(fmt)
    found = {fmt for fmt, ext in EXTENSIONS.items() if any(d.glob(f"*{ext}"))}
    if len(found) == 1:
        return found.pop()
    if not found:
        raise UserError(
            f"no shards in {d}: expected files ending in {', '.join(EXTENSIONS.values())} "
            f"(make some with `trainwise ingest gen-data`)"
        )
    raise UserError(f"{d} mixes formats {sorted(found)}; pass --format with one of {', '.join(FORMATS)}")


def list_shards(data_dir: str | os.PathLike[str], fmt: str | None = None) -> tuple[list[str], str]:
    """The shard files of ``data_dir`` (sorted) and their format; clear errors when unusable."""
    d = Path(data_dir)
    if not d.exists():
        raise UserError(f"data directory {d} does not exist; create data with `trainwise ingest gen-data --out {d}`")
    if not d.is_dir():
        raise UserError(f"data directory {d} is not a directory")
    if fmt is None:
        fmt = detect_format(d)
    if fmt not in FORMATS:
        raise UserError(f"format {fmt!r} is not supported; allowed formats: {', '.join(FORMATS)}")
    files = sorted(str(p) for p in d.glob(f"*{EXTENSIONS[fmt]}") if p.is_file())
    if not files:
        raise UserError(f"no {fmt} shards (*{EXTENSIONS[fmt]}) in {d}")
    empty = [f for f in files if os.path.getsize(f) == 0]
    if empty:
        raise UserError(f"empty shard {empty[0]} ({len(empty)} empty of {len(files)}); remove it or regenerate the data")
    return files, fmt


def table_sizes_for(data_dir: str | os.PathLike[str]) -> tuple[int, ...]:
    """Embedding-table sizes: the manifest's vocabularies if present, else the defaults."""
    manifest = Path(data_dir) / MANIFEST
    try:
        sizes = json.loads(manifest.read_text()).get("vocab_sizes")
    except (OSError, ValueError):
        sizes = None
    if isinstance(sizes, list) and len(sizes) == NUM_CAT and all(isinstance(s, int) and s >= 2 for s in sizes):
        return tuple(sizes)
    return DEFAULT_TABLE_SIZES


# ---------------------------------------------------------------------------------------
# Stage functions
# ---------------------------------------------------------------------------------------
def _par(value: int) -> int | None:
    """A parallelism knob as tf.data wants it: 0 -> None (sequential), -1 -> AUTOTUNE."""
    import tensorflow as tf

    if value == AUTOTUNE:
        return tf.data.AUTOTUNE
    return None if value == 0 else int(value)


def read_stage(files: list[str], fmt: str, *, cycle_length: int, parallelism: int, block_length: int = 1) -> "tf.data.Dataset":
    """Interleave records from the shards, endlessly.

    The effective read parallelism is ``min(parallelism, cycle_length)``: tf.data cannot
    read more files at once than it has open.
    """
    import tensorflow as tf

    reader = tf.data.TextLineDataset if fmt == "tsv" else tf.data.TFRecordDataset
    cycle = tf.data.AUTOTUNE if cycle_length == AUTOTUNE else min(int(cycle_length), len(files))
    if cycle_length != AUTOTUNE and parallelism != AUTOTUNE:
        parallelism = min(parallelism, cycle)  # tf.data refuses more parallel calls than open files
    return (
        tf.data.Dataset.from_tensor_slices(files)
        .repeat()
        .interleave(
            lambda f: reader(f),
            cycle_length=cycle,
            block_length=block_length,
            num_parallel_calls=_par(parallelism),
            deterministic=False if parallelism else None,
        )
    )


# One well-formed Criteo line: label, 13 optional integers, 26 optional 8-hex-digit ids.
TSV_ROW_REGEX = "[01]" + "(\t-?[0-9]*)" * NUM_DENSE + "(\t[0-9a-fA-F]{0,8})" * NUM_CAT


def parse_tsv_batch(lines: "tf.Tensor", skip_bad: bool = False) -> dict[str, "tf.Tensor"]:
    """Decode a batch of Criteo TSV lines. Missing dense -> -1 sentinel, missing cat -> ''.

    With ``skip_bad`` the lines that do not match :data:`TSV_ROW_REGEX` are dropped from
    the batch first (so that batch is smaller); otherwise a malformed line raises
    ``InvalidArgumentError`` from ``decode_csv``.
    """
    import tensorflow as tf

    if skip_bad:
        lines = tf.boolean_mask(lines, tf.strings.regex_full_match(lines, TSV_ROW_REGEX))
    defaults: list[Any] = [tf.constant([0], tf.int64)] + [tf.constant([-1], tf.int64)] * NUM_DENSE + [tf.constant([""], tf.string)] * NUM_CAT
    cols = tf.io.decode_csv(lines, record_defaults=defaults, field_delim="\t")
    return {
        "label": cols[0],
        "dense": tf.stack(cols[1 : 1 + NUM_DENSE], axis=1),
        "cat": tf.stack(cols[1 + NUM_DENSE :], axis=1),
    }


_EXAMPLE_SPEC: dict[str, tf.io.FixedLenFeature] | None = None


def _example_spec() -> dict[str, tf.io.FixedLenFeature]:
    global _EXAMPLE_SPEC
    if _EXAMPLE_SPEC is None:
        import tensorflow as tf

        spec: dict[str, tf.io.FixedLenFeature] = {"label": tf.io.FixedLenFeature([], tf.int64, default_value=0)}
        spec.update({n: tf.io.FixedLenFeature([], tf.int64, default_value=-1) for n in DENSE_NAMES})
        spec.update({n: tf.io.FixedLenFeature([], tf.string, default_value="") for n in CAT_NAMES})
        _EXAMPLE_SPEC = spec
    return _EXAMPLE_SPEC


def parse_tfrecord_batch(records: "tf.Tensor") -> dict[str, "tf.Tensor"]:
    """Decode a batch of serialised ``tf.train.Example``; absent features become missing."""
    import tensorflow as tf

    f = tf.io.parse_example(records, _example_spec())
    return {
        "label": f["label"],
        "dense": tf.stack([f[n] for n in DENSE_NAMES], axis=1),
        "cat": tf.stack([f[n] for n in CAT_NAMES], axis=1),
    }


def hex_to_int(hexes: "tf.Tensor") -> "tf.Tensor":
    """8-hex-digit strings -> int64 values; '' (missing) -> -1. Vectorised (no Python)."""
    import tensorflow as tf

    raw = tf.cast(tf.io.decode_raw(hexes, tf.uint8, fixed_length=8), tf.int64)  # [..., 8], zero-padded
    nibble = tf.where(raw >= 97, raw - 87, raw - 48)  # 'a'..'f' -> 10..15, '0'..'9' -> 0..9
    weights = tf.constant([16**k for k in range(7, -1, -1)], tf.int64)
    value = tf.reduce_sum(nibble * weights, axis=-1)
    return tf.where(tf.strings.length(hexes) == 0, tf.constant(-1, tf.int64), value)


def transform_batch(
    batch: Mapping[str, "tf.Tensor"],
    table_sizes: tuple[int, ...] = DEFAULT_TABLE_SIZES,
    bucket_boundaries: tuple[float, ...] | None = None,
) -> dict[str, "tf.Tensor"]:
    """Fill missing, ``log(max(x, 0) + 1)`` on dense, hash categoricals into their tables.

    Categorical id for table size ``s``: 0 when missing, else ``1 + (hex mod (s - 1))``,
    so row 0 of every embedding table is the "missing" embedding. With
    ``bucket_boundaries`` a ``dense_bucket`` int tensor is added (``tf.raw_ops.Bucketize``
    on the log values).
    """
    import tensorflow as tf

    dense = tf.cast(tf.maximum(batch["dense"], 0), tf.float32)  # missing (-1) -> 0
    dense = tf.math.log1p(dense)
    value = hex_to_int(batch["cat"])
    sizes = tf.constant([s - 1 for s in table_sizes], tf.int64)
    cat = tf.where(value < 0, tf.constant(0, tf.int64), 1 + tf.math.floormod(value, sizes))
    out = {"label": tf.cast(batch["label"], tf.float32), "dense": dense, "cat": cat}
    if bucket_boundaries:
        out["dense_bucket"] = tf.raw_ops.Bucketize(input=dense, boundaries=list(bucket_boundaries))
    return out


# ---------------------------------------------------------------------------------------
# Knob space and the builder
# ---------------------------------------------------------------------------------------
def dlrm_knob_space(node: Node, *, batch_sizes: tuple[int, ...] = (4096,), max_parallelism: int | None = None) -> KnobSpace:
    """The DLRM pipeline's knobs on ``node``: the CPU budget is the node's vCPUs.

    Parallelism values are 0 (inline), 1, 2, 4, ... up to the vCPUs; the three parallel
    stages share the budget. Buffer value lists are coarse on purpose, so an exhaustive
    grid (the oracle) finishes in minutes on a small node (80 configurations on 2 vCPUs).
    ``batch_size`` is the trainer's batch size: a knob with one value by default, because
    the trainer, not the pipeline, owns it (changing it changes training).
    ``shuffle_buffer`` never goes to 0: turning shuffling off would be faster but changes
    what the trainer sees.
    """
    cap = max(1, min(node.vcpus, max_parallelism or node.vcpus))
    par = tuple(sorted({0, 1, *(v for v in (2, 4, 8, 16, 32, 64) if v <= cap), cap}))
    knobs = (
        Knob("read_parallelism", par, kind="cpu", stage="read", default=0, limited_by="cycle_length"),
        Knob("cycle_length", (1, 4), kind="other", stage="read", default=1),
        Knob("shuffle_buffer", (1024, 8192), kind="buffer", stage="shuffle", default=1024),
        Knob("batch_size", tuple(sorted(set(batch_sizes))), kind="batch", stage="batch", default=max(batch_sizes)),
        Knob("parse_parallelism", par, kind="cpu", stage="parse", default=0),
        Knob("transform_parallelism", par, kind="cpu", stage="transform", default=0),
        Knob("prefetch_buffer", (1, 4), kind="buffer", stage="prefetch", default=1),
    )
    return KnobSpace(knobs=knobs, cpu_budget=node.vcpus, name="dlrm", fixed={"threadpool": node.vcpus})


# Knobs that tf.data can tune itself (set to AUTOTUNE for the AUTOTUNE baseline).
DLRM_AUTOTUNABLE = ("read_parallelism", "cycle_length", "parse_parallelism", "transform_parallelism", "prefetch_buffer")


def listed_shards(data_dir: str | os.PathLike[str], fmt: str | None,
                  shards: Sequence[str] | None) -> tuple[list[str], str]:
    """``shards`` and ``fmt`` when both are given (listed once already), else :func:`list_shards`."""
    if shards is not None and fmt is not None:
        return list(shards), fmt
    return list_shards(data_dir, fmt)


def dlrm_spec(
    data_dir: str,
    fmt: str | None = None,
    node: Node | NodeFields | None = None,
    batch_sizes: tuple[int, ...] | list[int] = (4096,),
    on_bad_row: str = "error",
    bucketize: bool = False,
    shards: Sequence[str] | None = None,
) -> "PipelineSpec":
    """The built-in DLRM pipeline as a :class:`~ingestion.pipeline.PipelineSpec`.

    All arguments are JSON values, so a measurement worker can rebuild the same spec
    (``node`` is a :class:`~ingestion.node.Node` or a dict of its fields; None = this machine).
    ``shards``: the shard files as :func:`list_shards` found them (with ``fmt``); None lists them
    here. Either way they are listed once: the spec and the worker's copy of it carry the list.
    """
    from ingestion.pipeline import PipelineSpec

    files, fmt = listed_shards(data_dir, fmt, shards)  # validate now, before any worker starts
    n = node if isinstance(node, Node) else node_of(node)  # a Node passes as it is
    space = dlrm_knob_space(n, batch_sizes=tuple(batch_sizes))
    kwargs = {"data_dir": str(data_dir), "fmt": fmt, "node": NodeFields(**asdict(n)), "batch_sizes": list(batch_sizes),
              "on_bad_row": on_bad_row, "bucketize": bucketize, "shards": files}

    def build(config: Config) -> "tf.data.Dataset":
        return build_dlrm_pipeline(data_dir, config, fmt=fmt, threadpool=None if _is_autotune(config) else n.vcpus,
                                   autotune_options=_is_autotune(config), on_bad_row=on_bad_row, bucketize=bucketize,
                                   ram_budget_mb=n.ram_budget_mb, shards=files)

    def build_upto(config: Config, stage: str) -> "tf.data.Dataset":
        return build_dlrm_pipeline(data_dir, config, fmt=fmt, threadpool=None if _is_autotune(config) else n.vcpus,
                                   autotune_options=_is_autotune(config), on_bad_row=on_bad_row, bucketize=bucketize,
                                   ram_budget_mb=n.ram_budget_mb, upto=stage, shards=files)

    return PipelineSpec(
        name=f"dlrm-{fmt}",
        build=build,
        space=space,
        rows_per_element=None if (on_bad_row == "skip" and fmt == "tsv") else (lambda c: int(c["batch_size"])),
        factory="ingestion.dlrm:dlrm_spec",
        factory_kwargs=kwargs,
        stages=STAGES,
        build_upto=build_upto,
        autotunable=DLRM_AUTOTUNABLE,
    )


def _is_autotune(config: Mapping[str, int]) -> bool:
    """A configuration with any AUTOTUNE value runs with tf.data's default options."""
    return any(int(v) == AUTOTUNE for v in config.values())


def build_dlrm_pipeline(
    data_dir: str | os.PathLike[str],
    config: Mapping[str, int],
    *,
    fmt: str | None = None,
    threadpool: int | None = None,
    autotune_options: bool = False,
    on_bad_row: str = "error",
    bucketize: bool = False,
    upto: str | None = None,
    ram_budget_mb: float | None = None,
    shards: Sequence[str] | None = None,
) -> "tf.data.Dataset":
    """The DLRM pipeline for knob ``config`` over the shards in ``data_dir``.

    ``threadpool`` sets ``threading.private_threadpool_size`` (None: ``config["threadpool"]``
    if present, else tf.data's default). ``autotune_options=False`` turns tf.data's
    autotuner off so that a configuration runs exactly as written; ``True`` leaves the
    default options (the AUTOTUNE baseline). ``on_bad_row``: ``"error"`` stops at the first
    malformed TSV line, ``"skip"`` drops malformed lines (count them with
    :func:`count_bad_rows`). ``upto`` stops after the named stage (for per-stage timing).
    ``shards`` (with ``fmt``): the shard files already listed; None lists them here.
    """
    import tensorflow as tf

    if on_bad_row not in BAD_ROW_POLICIES:
        raise UserError(f"on_bad_row={on_bad_row!r}; allowed: {', '.join(BAD_ROW_POLICIES)}")
    if upto is not None and upto not in STAGES:
        raise UserError(f"unknown stage {upto!r}; stages: {', '.join(STAGES)}")
    files, fmt = listed_shards(data_dir, fmt, shards)
    sizes = table_sizes_for(data_dir)
    c = dict(config)
    ds = read_stage(files, fmt, cycle_length=c.get("cycle_length", 1), parallelism=c.get("read_parallelism", 0))
    skip_bad = fmt == "tsv" and on_bad_row == "skip"
    parse = (lambda b: parse_tsv_batch(b, skip_bad)) if fmt == "tsv" else parse_tfrecord_batch
    stages: list[tuple[str, Any]] = [
        ("shuffle", lambda d: d.shuffle(c["shuffle_buffer"]) if c.get("shuffle_buffer", 0) > 0 else d),
        ("batch", lambda d: d.batch(c.get("batch_size", 4096), drop_remainder=True)),
        ("parse", lambda d: d.map(parse, num_parallel_calls=_par(c.get("parse_parallelism", 0)),
                                  deterministic=False if c.get("parse_parallelism", 0) else None)),
        ("transform", lambda d: d.map(lambda b: transform_batch(b, sizes, DEFAULT_BUCKET_BOUNDARIES if bucketize else None),
                                      num_parallel_calls=_par(c.get("transform_parallelism", 0)),
                                      deterministic=False if c.get("transform_parallelism", 0) else None)),
        ("prefetch", lambda d: d.prefetch(_prefetch(c.get("prefetch_buffer", 1)))),
    ]
    if upto != "read":
        for name, apply in stages:
            ds = apply(ds)
            if name == upto:
                break
    if upto in ("read", "shuffle"):
        # Per-row prefixes are timed in batches of 1024 (a cheap C++ op) so that the
        # measurement loop's Python overhead per element does not dominate.
        ds = ds.batch(1024)
    options = tf.data.Options()
    options.deterministic = False
    pool = threadpool if threadpool is not None else c.get("threadpool")
    if pool:
        options.threading.private_threadpool_size = int(pool)
    if not autotune_options:
        options.autotune.enabled = False
    elif ram_budget_mb:
        options.autotune.ram_budget = int(ram_budget_mb * 2**20)
    return ds.with_options(options)


def _prefetch(value: int) -> int:
    import tensorflow as tf

    return tf.data.AUTOTUNE if value == AUTOTUNE else int(value)


class CorruptShard(TypedDict):
    file: str
    record: int  # the index of the first record that fails
    error: str


class BadRows(TypedDict):
    """What :func:`count_bad_rows` found (``ingest check``'s report)."""

    rows: int
    bad_rows: int
    first_bad: str | None  # "file:line" (TSV) or "file:record N" (TFRecord)
    corrupt_files: NotRequired[list[CorruptShard]]  # TFRecord shards only


def count_bad_rows(data_dir: str | os.PathLike[str], fmt: str | None = None,
                   shards: Sequence[str] | None = None) -> BadRows:
    """Count malformed TSV lines: those not matching :data:`TSV_ROW_REGEX` (the same test
    the pipeline's ``on_bad_row="skip"`` applies). Returns rows, bad_rows and the first bad
    ``file:line``. TFRecord shards are read through once, checking every record's CRC
    (:func:`scan_tfrecords`): ``corrupt_files`` lists the shards that fail, with the record
    where they do.
    """
    import re

    files, fmt = listed_shards(data_dir, fmt, shards)
    if fmt != "tsv":
        return scan_tfrecords(files)
    pattern = re.compile(TSV_ROW_REGEX.encode())
    total = bad = 0
    first: str | None = None
    for f in files:
        with open(f, "rb") as fh:
            for lineno, line in enumerate(fh, 1):
                total += 1
                if pattern.fullmatch(line.rstrip(b"\n")) is None:
                    bad += 1
                    if first is None:
                        first = f"{f}:{lineno}"
    return {"rows": total, "bad_rows": bad, "first_bad": first}


def scan_tfrecords(files: list[Path]) -> BadRows:
    """Read every record of every shard (TensorFlow checks the length and data CRCs); a shard
    that is truncated or corrupt is listed with the index of the first record that fails."""
    import tensorflow as tf

    total = 0
    corrupt: list[CorruptShard] = []
    for f in files:
        read = 0
        try:
            for _ in tf.data.TFRecordDataset(str(f)):
                read += 1
        except (tf.errors.DataLossError, tf.errors.InvalidArgumentError, tf.errors.OutOfRangeError) as exc:
            corrupt.append({"file": str(f), "record": read, "error": f"{type(exc).__name__}: {exc.message}"[:300]})
        total += read
    first = f"{corrupt[0]['file']}:record {corrupt[0]['record']}" if corrupt else None
    return {"rows": total, "bad_rows": 0, "first_bad": first, "corrupt_files": corrupt}
