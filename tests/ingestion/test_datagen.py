"""The Criteo-format generator: schema, determinism, and the statistics it promises."""

from __future__ import annotations

import json

import numpy as np
import pytest

from ingestion import datagen
from core.errors import UserError


def test_tsv_schema_and_manifest(tmp_path):
    out = datagen.generate(1000, "tsv", tmp_path / "d", shards=3, seed=7)
    files = sorted((tmp_path / "d").glob("part-*.tsv"))
    assert len(files) == 3 and out["rows_per_shard"] == [334, 333, 333]
    lines = b"".join(f.read_bytes() for f in files).splitlines()
    assert len(lines) == 1000
    for line in lines[:200]:
        fields = line.split(b"\t")
        assert len(fields) == 40
        assert fields[0] in (b"0", b"1")
        assert all(v == b"" or v.isdigit() for v in fields[1:14])
        assert all(v == b"" or (len(v) == 8 and all(c in b"0123456789abcdef" for c in v)) for v in fields[14:])
    manifest = json.loads((tmp_path / "d" / datagen.MANIFEST).read_text())
    assert manifest["format"] == "tsv" and manifest["rows"] == 1000 and len(manifest["vocab_sizes"]) == 26


def test_deterministic_from_seed(tmp_path):
    datagen.generate(500, "tsv", tmp_path / "a", shards=2, seed=3)
    datagen.generate(500, "tsv", tmp_path / "b", shards=2, seed=3)
    datagen.generate(500, "tsv", tmp_path / "c", shards=2, seed=4)
    a = (tmp_path / "a" / "part-00000.tsv").read_bytes()
    assert a == (tmp_path / "b" / "part-00000.tsv").read_bytes()
    assert a != (tmp_path / "c" / "part-00000.tsv").read_bytes()


def test_statistics_heavy_tail_missing_power_law():
    s = datagen.generate_shard(20000, seed=0, shard=0)
    dense = s.dense
    missing = (dense < 0).mean(axis=0)
    assert 0.02 < missing.min() and missing.max() < 0.5  # every dense feature has some missing values
    present = dense[:, 0][dense[:, 0] >= 0].astype(float)
    assert present.max() > 20 * np.median(present) + 1  # heavy tail
    ids, counts = np.unique(s.cats[:, 20], return_counts=True)
    top = np.sort(counts)[::-1]
    assert top[0] > 50 * np.median(top)  # power law: one id dominates, most are rare
    assert 0.2 < s.label.mean() < 0.3
    assert 0.02 < s.cat_missing.mean() < 0.04


def test_tfrecord_round_trip(tmp_path):
    import tensorflow as tf
    datagen.generate(50, "tfrecord", tmp_path / "t", shards=1, seed=1)
    shard = datagen.generate_shard(50, seed=1, shard=0)
    records = list(tf.data.TFRecordDataset(str(tmp_path / "t" / "part-00000.tfrecord")).as_numpy_iterator())
    assert len(records) == 50
    ex = tf.train.Example.FromString(records[0]).features.feature
    assert ex["label"].int64_list.value[0] == shard.label[0]
    for j in range(13):
        name = f"I{j + 1}"
        assert (name in ex) == (shard.dense[0, j] >= 0)
    present = [j for j in range(26) if not shard.cat_missing[0, j]]
    j = present[0]
    assert ex[f"C{j + 1}"].bytes_list.value[0] == f"{shard.cats[0, j]:08x}".encode()


@pytest.mark.parametrize(
    "kwargs, match",
    [({"rows": 0, "fmt": "tsv"}, "--rows"), ({"rows": 10, "fmt": "csv"}, "allowed formats"),
     ({"rows": 10, "fmt": "tsv", "shards": 20}, "--shards")],
)
def test_bad_arguments(tmp_path, kwargs, match):
    with pytest.raises(UserError, match=match):
        datagen.generate(kwargs.pop("rows"), kwargs.pop("fmt"), tmp_path / "x", **kwargs)


def test_refuses_to_overwrite(tmp_path):
    datagen.generate(10, "tsv", tmp_path / "d", shards=1)
    with pytest.raises(UserError, match="already holds shards"):
        datagen.generate(10, "tsv", tmp_path / "d", shards=1)
