"""Image-embedding rows in TFRecord (1,024 floats, about 4 KB a row) behind a memory-hungry shuffle.

``read -> shuffle (raw records) -> batch(256) -> parse -> prefetch``. The ``shuffle_buffer``
knob holds up to 400,000 records: about 1.7 GB, more than the suite node's RAM budget, so the
largest buffer runs out of memory (the measurement worker stops it at the budget).
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

NAME = "shuffle-heavy"
WIDTH = 1024
BATCH = 256
SHUFFLE = (1_000, 10_000, 100_000, 400_000)


def space(node: Node) -> KnobSpace:
    return KnobSpace((
        Knob("read", parallelism(node), kind="cpu", stage="read", default=0),
        Knob("shuffle_buffer", SHUFFLE, kind="buffer", stage="shuffle", default=10_000),
        Knob("parse", parallelism(node), kind="cpu", stage="parse", default=0),
        Knob("prefetch", (1, 4), kind="buffer", stage="prefetch", default=1),
    ), cpu_budget=node.vcpus, name=NAME)


def model(space: KnobSpace) -> PipelineModel:
    """Synthetic stage costs in this pipeline's shape (big records, a shuffle that misses caches)."""
    return PipelineModel(NAME, (
        StageModel("read", 1.2e-6, wait_s_per_row=1.5e-6, bytes_per_row=4200, threads_knob="read",
                   async_cpu_s_per_call=0.4e-6),
        StageModel("shuffle", 0.3e-6, bytes_per_row=4200, buffer_knob="shuffle_buffer",
                   cost_deltas={"shuffle_buffer": {1_000: 0.0, 10_000: 0.1e-6, 100_000: 0.4e-6, 400_000: 0.8e-6}}),
        StageModel("batch", 0.2e-6, 5e-6, bytes_per_row=4200, batched=True),
        StageModel("parse", 3.5e-6, 60e-6, bytes_per_row=4100, threads_knob="parse", batched=True),
        StageModel("prefetch", 0.01e-6, 2e-6, bytes_per_row=4100, buffer_knob="prefetch", batched=True),
    ), default_batch=BATCH, base_mb=450.0, burstiness=0.15, oversub_overhead=0.05, source="synthetic (suite)")


def generate(out: str | Path, seed: int = 0, rows: int = 6_000, shards: int = 4) -> Path:
    rng = np.random.default_rng(seed)

    def records(n: int):
        import tensorflow as tf

        emb = rng.normal(0.0, 1.0, (n, WIDTH)).astype(np.float32)
        for i in range(n):
            yield tf.train.Example(features=tf.train.Features(feature={
                "id": tf.train.Feature(int64_list=tf.train.Int64List(value=[i])),
                "embedding": tf.train.Feature(float_list=tf.train.FloatList(value=emb[i].tolist())),
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

        features = {"id": tf.io.FixedLenFeature([], tf.int64), "embedding": tf.io.FixedLenFeature([WIDTH], tf.float32)}
        reads = None if c["read"] == 0 else par(c["read"])
        ds = tf.data.TFRecordDataset(tf.data.Dataset.from_tensor_slices(files).repeat(), num_parallel_reads=reads)
        ds = ds.shuffle(c["shuffle_buffer"]).batch(BATCH, drop_remainder=True)
        ds = ds.map(lambda x: tf.io.parse_example(x, features), num_parallel_calls=par(c["parse"]), deterministic=det(c["parse"]))
        return finish(ds.prefetch(buffer(c["prefetch"])), c, n)

    return PipelineSpec(NAME, build, space(n), rows_per_element=BATCH, factory=f"{__name__}:make_spec",
                        factory_kwargs={"data_dir": str(data_dir), "node": node_fields(n)},
                        autotunable=("read", "parse", "prefetch"))
