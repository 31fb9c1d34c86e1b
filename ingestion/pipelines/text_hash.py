"""Search logs in TSV (query and title text), transform-bound on string ops and hashing.

``read (one TextLineDataset, no interleave) -> batch -> tokenize (split, hash words) ->
features (bigrams, hash buckets, a query x title cross) -> prefetch``. Two parallel map stages
and a batch knob; no read parallelism, no cycle.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from ingestion.knobs import Config, Knob, KnobSpace
from ingestion.node import Node, NodeFields, node_fields, node_of
from ingestion.pipelines._common import (buffer, det, finish, par, parallelism, shard_files,
                                         text_writer, write_shards)
from ingestion.simulator import PipelineModel, StageModel

if TYPE_CHECKING:  # pragma: no cover
    from ingestion.pipeline import PipelineSpec

NAME = "text-hash"
BUCKETS = 1 << 20


def space(node: Node) -> KnobSpace:
    return KnobSpace((
        Knob("batch", (128, 512, 2048), kind="batch", stage="batch", default=512),
        Knob("tokenize", parallelism(node), kind="cpu", stage="tokenize", default=0),
        Knob("features", parallelism(node), kind="cpu", stage="features", default=0),
        Knob("prefetch", (1, 4), kind="buffer", stage="prefetch", default=1),
    ), cpu_budget=node.vcpus, name=NAME)


def model(space: KnobSpace) -> PipelineModel:
    """Synthetic stage costs in this pipeline's shape (string ops dominate, bigrams most)."""
    return PipelineModel(NAME, (
        StageModel("read", 0.7e-6, wait_s_per_row=0.3e-6, bytes_per_row=160),
        StageModel("batch", 0.1e-6, 5e-6, bytes_per_row=160, batched=True),
        StageModel("tokenize", 3.0e-6, 120e-6, bytes_per_row=400, threads_knob="tokenize", batched=True),
        StageModel("features", 7.5e-6, 200e-6, bytes_per_row=900, threads_knob="features", batched=True),
        StageModel("prefetch", 0.01e-6, 2e-6, bytes_per_row=900, buffer_knob="prefetch", batched=True),
    ), batch_knob="batch", default_batch=512, base_mb=430.0, burstiness=0.2, oversub_overhead=0.05,
        source="synthetic (suite)")


def generate(out: str | Path, seed: int = 0, rows: int = 12_000, shards: int = 3) -> Path:
    rng = np.random.default_rng(seed)
    vocab = [f"w{i}" for i in range(5000)]
    zipf = np.minimum(rng.zipf(1.3, size=10 * rows), len(vocab)) - 1

    def lines(n: int, offset: int) -> list[str]:
        out, k = [], offset
        for _ in range(n):
            q, t = int(rng.integers(2, 8)), int(rng.integers(8, 24))
            words = [vocab[int(j)] for j in zipf[k % len(zipf): k % len(zipf) + q + t]]
            k += q + t
            out.append(f"{int(rng.random() < 0.1)}\t{' '.join(words[:q])}\t{' '.join(words[q:])}")
        return out

    per = rows // shards
    return write_shards(out, NAME, ".tsv", [text_writer(lines(per, i * per * 30)) for i in range(shards)],
                        {"rows": rows, "shards": shards, "seed": seed})


def make_spec(data_dir: str, node: NodeFields | Node | None = None) -> "PipelineSpec":
    from ingestion.pipeline import PipelineSpec

    n = node_of(node)
    files = shard_files(data_dir, ".tsv", NAME)

    def build(c: Config):
        import tensorflow as tf

        def tokenize(lines):
            cols = tf.io.decode_csv(lines, [[0], [""], [""]], field_delim="\t")
            query, title = tf.strings.split(cols[1]), tf.strings.split(cols[2])
            return {"label": cols[0], "query": query, "title": title,
                    "query_ids": tf.strings.to_hash_bucket_fast(query, BUCKETS)}

        def features(b):
            title_bigrams = tf.strings.ngrams(b["title"], 2, separator=" ")
            cross = tf.strings.join([tf.strings.reduce_join(b["query"], axis=-1, separator="_"),
                                     tf.strings.reduce_join(b["title"][:, :3], axis=-1, separator="_")], "|")
            return {"label": b["label"], "query_ids": b["query_ids"],
                    "title_ids": tf.strings.to_hash_bucket_strong(b["title"], BUCKETS, [7, 11]),
                    "bigram_ids": tf.strings.to_hash_bucket_fast(title_bigrams, BUCKETS),
                    "cross_id": tf.strings.to_hash_bucket_fast(cross, BUCKETS)}

        ds = tf.data.TextLineDataset(tf.data.Dataset.from_tensor_slices(files).repeat())
        ds = ds.batch(c["batch"], drop_remainder=True)
        ds = ds.map(tokenize, num_parallel_calls=par(c["tokenize"]), deterministic=det(c["tokenize"]))
        ds = ds.map(features, num_parallel_calls=par(c["features"]), deterministic=det(c["features"]))
        return finish(ds.prefetch(buffer(c["prefetch"])), c, n)

    return PipelineSpec(NAME, build, space(n), rows_per_element=lambda c: int(c["batch"]),
                        factory=f"{__name__}:make_spec",
                        factory_kwargs={"data_dir": str(data_dir), "node": node_fields(n)},
                        autotunable=("tokenize", "features", "prefetch"))
