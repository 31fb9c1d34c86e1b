"""The DLRM tf.data pipeline: shapes, hand-computed transforms, formats, and bad input."""

from __future__ import annotations

import math

import numpy as np
import pytest

import tensorflow as tf  # noqa: E402  (a missing TensorFlow fails these tests, never skips them)

from ingestion import datagen  # noqa: E402
from ingestion.dlrm import (  # noqa: E402
    DEFAULT_TABLE_SIZES,
    build_dlrm_pipeline,
    count_bad_rows,
    dlrm_knob_space,
    list_shards,
)
from ingestion.node import Node  # noqa: E402
from core.errors import UserError  # noqa: E402

# Sequential, unshuffled: rows come out in file order.
ORDERED = dict(read_parallelism=0, cycle_length=1, shuffle_buffer=0, batch_size=2, parse_parallelism=0,
               transform_parallelism=0, prefetch_buffer=1)


def _row(label: int, dense: list[str], cats: list[str]) -> str:
    assert len(dense) == 13 and len(cats) == 26
    return "\t".join([str(label), *dense, *cats])


ROW_A = _row(1, ["0", "", "9", "1"] + ["3"] * 9, ["0000000a", ""] + ["ffffffff"] * 24)
ROW_B = _row(0, [""] * 13, ["00000001"] * 26)


def _write(tmp_path, lines, name="part-00000.tsv"):
    d = tmp_path / "data"
    d.mkdir(exist_ok=True)
    (d / name).write_text("\n".join(lines) + "\n")
    return d


def _first_batch(d, config=ORDERED, **kw):
    return next(iter(build_dlrm_pipeline(d, config, **kw).take(1)))


def test_transform_matches_hand_computed_rows(tmp_path):
    d = _write(tmp_path, [ROW_A, ROW_B])
    b = _first_batch(d)
    assert b["dense"].shape == (2, 13) and b["cat"].shape == (2, 26) and b["label"].shape == (2,)
    np.testing.assert_allclose(b["label"].numpy(), [1.0, 0.0])
    # dense: log(x + 1); missing -> 0 -> log(1) = 0
    expected_a = [math.log(1), 0.0, math.log(10), math.log(2)] + [math.log(4)] * 9
    np.testing.assert_allclose(b["dense"].numpy()[0], expected_a, rtol=1e-6)
    np.testing.assert_allclose(b["dense"].numpy()[1], [0.0] * 13)
    # categorical: 1 + (hex mod (table_size - 1)); missing -> 0
    sizes = DEFAULT_TABLE_SIZES
    cat_a = b["cat"].numpy()[0]
    assert cat_a[0] == 1 + (10 % (sizes[0] - 1))
    assert cat_a[1] == 0
    assert cat_a[5] == 1 + (0xFFFFFFFF % (sizes[5] - 1))
    assert list(b["cat"].numpy()[1]) == [1 + (1 % (s - 1)) for s in sizes]


def test_bucketize_adds_bucket_ids(tmp_path):
    d = _write(tmp_path, [ROW_A, ROW_B])
    b = _first_batch(d, bucketize=True)
    # log(10) = 2.30 lies between boundaries 2.0 and 3.0 -> bucket 3; 0 -> bucket 0
    assert b["dense_bucket"].numpy()[0][2] == 3
    assert b["dense_bucket"].numpy()[1][0] == 0


def test_tsv_and_tfrecord_give_the_same_rows(tmp_path):
    datagen.generate(64, "tsv", tmp_path / "t", shards=1, seed=5)
    datagen.generate(64, "tfrecord", tmp_path / "r", shards=1, seed=5)
    cfg = {**ORDERED, "batch_size": 64}
    a, b = _first_batch(tmp_path / "t", cfg), _first_batch(tmp_path / "r", cfg)
    for key in ("label", "dense", "cat"):
        np.testing.assert_allclose(a[key].numpy(), b[key].numpy(), rtol=1e-6)


@pytest.mark.parametrize("fmt", ["tsv", "tfrecord"])
def test_parallel_configuration_shapes(tmp_path, fmt):
    datagen.generate(300, fmt, tmp_path / fmt, shards=3, seed=0)
    cfg = dict(read_parallelism=2, cycle_length=4, shuffle_buffer=128, batch_size=32, parse_parallelism=2,
               transform_parallelism=1, prefetch_buffer=4)
    batches = list(build_dlrm_pipeline(tmp_path / fmt, cfg, threadpool=2).take(20))  # > one epoch: repeats
    assert len(batches) == 20
    assert all(b["dense"].shape == (32, 13) and b["cat"].dtype == tf.int64 for b in batches)
    assert all(np.isfinite(b["dense"].numpy()).all() for b in batches)


def test_autotune_values_build(tmp_path):
    datagen.generate(100, "tsv", tmp_path / "d", shards=2)
    cfg = {**ORDERED, "read_parallelism": -1, "cycle_length": -1, "parse_parallelism": -1,
           "transform_parallelism": -1, "prefetch_buffer": -1, "batch_size": 10}
    b = _first_batch(tmp_path / "d", cfg, autotune_options=True)
    assert b["cat"].shape == (10, 26)


def test_format_detected_without_manifest(tmp_path):
    d = _write(tmp_path, [ROW_A])
    assert list_shards(d)[1] == "tsv"


def test_bad_data_directory(tmp_path):
    with pytest.raises(UserError, match="does not exist"):
        list_shards(tmp_path / "nope")
    (tmp_path / "empty").mkdir()
    with pytest.raises(UserError, match="no shards"):
        list_shards(tmp_path / "empty")


def test_empty_shard_is_an_error(tmp_path):
    d = _write(tmp_path, [ROW_A, ROW_B])
    (d / "part-00001.tsv").write_text("")
    with pytest.raises(UserError, match="empty shard .*part-00001.tsv"):
        build_dlrm_pipeline(d, ORDERED)


def test_malformed_row_error_or_skip(tmp_path):
    bad = "1\tnot-a-number\t" + "\t" * 37
    d = _write(tmp_path, [ROW_A, bad, ROW_B, ROW_A])
    report = count_bad_rows(d)
    assert report["bad_rows"] == 1 and report["rows"] == 4 and report["first_bad"].endswith("part-00000.tsv:2")
    with pytest.raises(tf.errors.InvalidArgumentError):
        _first_batch(d, {**ORDERED, "batch_size": 4}, on_bad_row="error")
    b = _first_batch(d, {**ORDERED, "batch_size": 4}, on_bad_row="skip")
    assert b["label"].shape == (3,)  # the bad row is dropped from its batch, the rest kept
    np.testing.assert_allclose(b["label"].numpy(), [1.0, 0.0, 1.0])


def test_knob_space_budget_and_impossible_budget():
    space = dlrm_knob_space(Node("n", vcpus=2, ram_gib=4))
    assert space.cpu_budget == 2 and space.grid_size() == 80
    assert all(space.cpu_used(c) <= 2 for c in space.grid())
    with pytest.raises(UserError, match="vcpus"):
        Node("n", vcpus=0, ram_gib=4)
    big = dlrm_knob_space(Node("big", vcpus=32, ram_gib=128))
    assert big.knob("parse_parallelism").values == (0, 1, 2, 4, 8, 16, 32)
