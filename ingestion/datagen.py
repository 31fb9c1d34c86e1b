"""Synthetic Criteo-format click logs, written as sharded files.

Each row is the Criteo Kaggle/Terabyte layout: one 0/1 label, 13 integer ("dense")
features ``I1..I13`` and 26 categorical features ``C1..C26`` given as 8-hex-digit
hashes. The statistics imitate the real logs where a pipeline's cost depends on them:

* dense values are heavy-tailed non-negative integers (a discretised Pareto/lognormal
  mix, so ``log(x + 1)`` matters) and each feature is missing with its own rate
  (5%-45%), written as an empty field (TSV) or an absent feature (TFRecord);
* categorical ids follow a power law (Zipf, exponent 1.05-1.5) over per-feature
  vocabularies from 10 to 1,000,000 values, and are hashed to 8 hex digits; about 3%
  of them are missing;
* the label is 1 for about 25% of rows (Criteo's click rate).

Output is deterministic from ``seed``: shard ``i`` draws from
``SeedSequence([seed, i])``, so the same (rows, shards, seed) gives byte-identical
files in any format. A ``_manifest.json`` next to the shards records the format,
counts and schema; ``trainwise ingest tune`` reads it to detect the format.

Formats: ``tsv`` (Criteo's own text format, read with ``TextLineDataset``) and
``tfrecord`` (``tf.train.Example`` records, read with ``TFRecordDataset``), the two
formats tf.data DLRM pipelines read. Parquet is not offered: tf.data has no Parquet
reader without tensorflow-io, which has no build for TF 2.21.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Iterator, TypedDict

import numpy as np

from core.atomic import write_bytes, write_file, write_text
from core.errors import UserError

NUM_DENSE = 13
NUM_CAT = 26
FORMATS = ("tsv", "tfrecord")
EXTENSIONS = {"tsv": ".tsv", "tfrecord": ".tfrecord"}
MANIFEST = "_manifest.json"
DENSE_NAMES = tuple(f"I{i}" for i in range(1, NUM_DENSE + 1))
CAT_NAMES = tuple(f"C{i}" for i in range(1, NUM_CAT + 1))

# Per-feature vocabulary sizes, log-spaced from 10 to 1e6 like Criteo's (which span
# 3 to ~10M); fixed so that a data set's statistics never depend on the row count.
VOCAB_SIZES = tuple(int(round(10 ** (1 + 5 * i / (NUM_CAT - 1)))) for i in range(NUM_CAT))
DENSE_MISSING = tuple(0.05 + 0.40 * ((7 * i) % NUM_DENSE) / (NUM_DENSE - 1) for i in range(NUM_DENSE))
CAT_MISSING = 0.03
CLICK_RATE = 0.25
_HEX = np.frombuffer(b"0123456789abcdef", dtype=np.uint8)


@dataclass(frozen=True)
class Shard:
    """One shard's columns: label (n,), dense (n,13) with -1 for missing, cats (n,26)
    as uint32 hashes with ``cat_missing`` marking the missing ones."""

    label: np.ndarray
    dense: np.ndarray
    cats: np.ndarray
    cat_missing: np.ndarray

    def __len__(self) -> int:
        return len(self.label)


def _hash32(ids: np.ndarray, feature: int) -> np.ndarray:
    """A fixed 32-bit mix of (feature, id), standing in for Criteo's hashed ids."""
    with np.errstate(over="ignore"):
        return _mix64(ids.astype(np.uint64), feature)


def _mix64(ids: np.ndarray, feature: int) -> np.ndarray:
    x = ids * np.uint64(0x9E3779B97F4A7C15) + np.uint64((feature * 0x632BE59BD9B4E019 + 1) % 2**64)
    x ^= x >> np.uint64(31)
    x *= np.uint64(0xBF58476D1CE4E5B9)
    x ^= x >> np.uint64(29)
    return (x & np.uint64(0xFFFFFFFF)).astype(np.uint32)


def generate_shard(rows: int, seed: int, shard: int) -> Shard:
    """Draw one shard's rows (deterministic in ``seed`` and ``shard``)."""
    rng = np.random.default_rng(np.random.SeedSequence([seed, shard]))
    label = (rng.random(rows) < CLICK_RATE).astype(np.int64)
    dense = np.empty((rows, NUM_DENSE), dtype=np.int64)
    for j in range(NUM_DENSE):
        # Pareto tail (shape 1.1-2.3) times a per-feature scale: most values small,
        # a few in the tens of thousands, as in Criteo's counters.
        shape = 1.1 + 1.2 * j / (NUM_DENSE - 1)
        scale = 10 ** (j % 4)
        values = np.floor(rng.pareto(shape, rows) * scale).astype(np.int64)
        np.minimum(values, 10**7, out=values)
        values[rng.random(rows) < DENSE_MISSING[j]] = -1
        dense[:, j] = values
    cats = np.empty((rows, NUM_CAT), dtype=np.uint32)
    cat_missing = rng.random((rows, NUM_CAT)) < CAT_MISSING
    for j in range(NUM_CAT):
        exponent = 1.05 + 0.45 * ((5 * j) % NUM_CAT) / (NUM_CAT - 1)
        ids = (rng.zipf(exponent, rows) - 1) % VOCAB_SIZES[j]
        cats[:, j] = _hash32(ids, j)
    return Shard(label=label, dense=dense, cats=cats, cat_missing=cat_missing)


def hex8(values: np.ndarray) -> np.ndarray:
    """uint32 array -> array of 8-character lowercase hex byte strings (dtype S8)."""
    v = values.astype(np.uint32)
    nibbles = np.stack([(v >> np.uint32(4 * (7 - k))) & np.uint32(0xF) for k in range(8)], axis=-1)
    chars = _HEX[nibbles.astype(np.intp)]
    return np.ascontiguousarray(chars).view("S8").reshape(v.shape)


def tsv_lines(shard: Shard) -> list[bytes]:
    """The shard as Criteo TSV lines (no trailing newline); missing fields are empty."""
    columns: list[np.ndarray] = [shard.label.astype("S1")]
    for j in range(NUM_DENSE):
        col = shard.dense[:, j].astype("S12")
        col[shard.dense[:, j] < 0] = b""
        columns.append(col)
    hexes = hex8(shard.cats)
    for j in range(NUM_CAT):
        col = hexes[:, j].astype("S8")
        col[shard.cat_missing[:, j]] = b""
        columns.append(col)
    line = columns[0]
    for col in columns[1:]:
        line = np.char.add(np.char.add(line, b"\t"), col)
    return line.tolist()


def tf_examples(shard: Shard) -> Iterator[bytes]:
    """The shard as serialised ``tf.train.Example`` records; missing features are absent."""
    import tensorflow as tf

    hexes = hex8(shard.cats)
    feature = tf.train.Feature
    for i in range(len(shard)):
        f: dict[str, tf.train.Feature] = {"label": feature(int64_list=tf.train.Int64List(value=[int(shard.label[i])]))}
        for j, name in enumerate(DENSE_NAMES):
            v = int(shard.dense[i, j])
            if v >= 0:
                f[name] = feature(int64_list=tf.train.Int64List(value=[v]))
        for j, name in enumerate(CAT_NAMES):
            if not shard.cat_missing[i, j]:
                f[name] = feature(bytes_list=tf.train.BytesList(value=[bytes(hexes[i, j])]))
        yield tf.train.Example(features=tf.train.Features(feature=f)).SerializeToString()


def shard_path(out: Path, index: int, fmt: str) -> Path:
    return out / f"part-{index:05d}{EXTENSIONS[fmt]}"


def _write_tfrecords(path: Path, shard: "Shard") -> None:
    import tensorflow as tf

    with tf.io.TFRecordWriter(str(path)) as writer:
        for record in tf_examples(shard):
            writer.write(record)


class Schema(TypedDict):
    label: str
    dense: list[str]
    categorical: list[str]


class Manifest(TypedDict):
    """The data folder's manifest (``MANIFEST``): what was generated, and how."""

    format: str
    rows: int
    shards: int
    rows_per_shard: list[int]
    seed: int
    schema: Schema
    vocab_sizes: list[int]
    generator: str


class Generated(Manifest):
    out: str  # the folder the shards are in


def generate(rows: int, fmt: str, out: str | os.PathLike[str], *, shards: int | None = None, seed: int = 0) -> Generated:
    """Write ``rows`` rows as ``shards`` files of format ``fmt`` into ``out``; return the manifest.

    The default shard count gives about 25,000 rows per shard, at least 4 shards, so that
    interleave's cycle length has files to cycle over.
    """
    if fmt not in FORMATS:
        raise UserError(f"--format {fmt!r} is not supported; allowed formats: {', '.join(FORMATS)}")
    if rows < 1:
        raise UserError(f"--rows must be at least 1, got {rows}")
    if shards is None:
        shards = max(4, min(64, rows // 25_000))
    if not 1 <= shards <= rows:
        raise UserError(f"--shards must be between 1 and the row count ({rows}), got {shards}")
    out_dir = Path(out)
    if out_dir.exists() and not out_dir.is_dir():
        raise UserError(f"--out {out_dir} exists and is not a directory")
    existing = [p for p in out_dir.glob("part-*")] if out_dir.exists() else []
    if existing:
        raise UserError(f"--out {out_dir} already holds shards ({existing[0].name}, ...); give an empty or new directory")
    out_dir.mkdir(parents=True, exist_ok=True)
    per_shard = [rows // shards + (1 if i < rows % shards else 0) for i in range(shards)]
    for index, n in enumerate(per_shard):
        shard = generate_shard(n, seed, index)
        path = shard_path(out_dir, index, fmt)
        if fmt == "tsv":
            write_bytes(path, b"\n".join(tsv_lines(shard)) + b"\n")
        else:
            write_file(path, lambda tmp, shard=shard: _write_tfrecords(tmp, shard))
    manifest: Manifest = {
        "format": fmt,
        "rows": rows,
        "shards": shards,
        "rows_per_shard": per_shard,
        "seed": seed,
        "schema": {"label": "int 0/1", "dense": list(DENSE_NAMES), "categorical": list(CAT_NAMES)},
        "vocab_sizes": list(VOCAB_SIZES),
        "generator": "trainwise.ingestion.datagen v1",
    }
    write_text(out_dir / MANIFEST, json.dumps(manifest, indent=2))
    return {"out": str(out_dir), **manifest}
