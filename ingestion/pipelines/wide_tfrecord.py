"""Wide feature rows in TFRecord (256 floats and 32 ids per row), parse-bound, with a batch knob.

``read (TFRecordDataset, parallel reads) -> batch -> parse (parse_example) -> prefetch``; no
interleave cycle. ``parse_example`` on a batch of wide rows is the expensive stage.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from ingestion.knobs import Config, Knob, KnobSpace
from ingestion.node import Node, NodeFields, node_fields, node_of
from ingestion.pipelines._common import (buffer, det, finish, par, parallelism, shard_files,
                                         tfrecord_writer, write_shards)
from ingestion.simulator import PipelineModel, StageModel

if TYPE_CHECKING:  # pragma: no cover
    from ingestion.pipeline import PipelineSpec

NAME = "wide-tfrecord"
DENSE, IDS = 256, 32


def space(node: Node) -> KnobSpace:
    return KnobSpace((
        Knob("read", parallelism(node), kind="cpu", stage="read", default=0),
        Knob("batch", (128, 512, 2048), kind="batch", stage="batch", default=512),
        Knob("parse", parallelism(node), kind="cpu", stage="parse", default=0),
        Knob("prefetch", (1, 2, 4), kind="buffer", stage="prefetch", default=1),
    ), cpu_budget=node.vcpus, name=NAME)


def model(space: KnobSpace) -> PipelineModel:
    """Synthetic stage costs in this pipeline's shape (a costly batched parse of wide rows)."""
    return PipelineModel(NAME, (
        StageModel("read", 0.4e-6, wait_s_per_row=0.4e-6, bytes_per_row=1400, threads_knob="read",
                   async_cpu_s_per_call=0.4e-6),
        StageModel("batch", 0.1e-6, 5e-6, bytes_per_row=1400, batched=True),
        StageModel("parse", 6.0e-6, 150e-6, bytes_per_row=1300, threads_knob="parse", batched=True),
        StageModel("prefetch", 0.01e-6, 2e-6, bytes_per_row=1300, buffer_knob="prefetch", batched=True),
    ), batch_knob="batch", default_batch=512, base_mb=450.0, burstiness=0.2, oversub_overhead=0.05,
        source="synthetic (suite)")


def generate(out: str | Path, seed: int = 0, rows: int = 8_000, shards: int = 4) -> Path:
    rng = np.random.default_rng(seed)

    def records(n: int):
        import tensorflow as tf

        dense = rng.normal(0.0, 1.0, (n, DENSE)).astype(np.float32)
        ids = rng.integers(0, 100_000, (n, IDS))
        label = (rng.random(n) < 0.3).astype(np.int64)
        f = tf.train.Feature
        for i in range(n):
            yield tf.train.Example(features=tf.train.Features(feature={
                "label": f(int64_list=tf.train.Int64List(value=[int(label[i])])),
                "dense": f(float_list=tf.train.FloatList(value=dense[i].tolist())),
                "ids": f(int64_list=tf.train.Int64List(value=ids[i].tolist())),
            })).SerializeToString()

    per = rows // shards
    return write_shards(out, NAME, ".tfrecord", [tfrecord_writer(lambda: records(per)) for _ in range(shards)],
                        {"rows": rows, "shards": shards, "seed": seed})


def make_spec(data_dir: str, node: NodeFields | Node | None = None) -> "PipelineSpec":
    from ingestion.pipeline import PipelineSpec

    n = node_of(node)
    files = shard_files(data_dir, ".tfrecord", NAME)

    def build(c: Config):
        import tensorflow as tf

        features = {"label": tf.io.FixedLenFeature([], tf.int64), "dense": tf.io.FixedLenFeature([DENSE], tf.float32),
                    "ids": tf.io.FixedLenFeature([IDS], tf.int64)}
        reads = None if c["read"] == 0 else par(c["read"])
        ds = tf.data.TFRecordDataset(tf.data.Dataset.from_tensor_slices(files).repeat(), num_parallel_reads=reads)
        ds = ds.batch(c["batch"], drop_remainder=True)
        ds = ds.map(lambda x: tf.io.parse_example(x, features), num_parallel_calls=par(c["parse"]), deterministic=det(c["parse"]))
        return finish(ds.prefetch(buffer(c["prefetch"])), c, n)

    return PipelineSpec(NAME, build, space(n), rows_per_element=lambda c: int(c["batch"]),
                        factory=f"{__name__}:make_spec",
                        factory_kwargs={"data_dir": str(data_dir), "node": node_fields(n)},
                        autotunable=("read", "parse", "prefetch"))
