"""Sensor readings in CSV, decoded row by row (no batch knob): parse-bound on per-element work.

``read -> parse each line (map) -> batch(256) -> prefetch``. The read stage interleaves files
(``cycle`` of kind ``other``, ``read`` threads limited by it; the builder caps ``read`` at
``cycle`` itself, so every configuration is valid). Parsing one line per call pays tf.data's
per-element overhead on every row, so the ``parse`` threads matter most.
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

NAME = "rowmap-csv"
BATCH = 256


def space(node: Node) -> KnobSpace:
    return KnobSpace((
        Knob("cycle", (1, 2), kind="other", stage="read", default=1),
        Knob("read", parallelism(node, cap=2), kind="cpu", stage="read", default=0, limited_by="cycle"),
        Knob("parse", parallelism(node), kind="cpu", stage="parse", default=0),
        Knob("prefetch", (1, 8), kind="buffer", stage="prefetch", default=1),
    ), cpu_budget=node.vcpus, name=NAME)


def model(space: KnobSpace) -> PipelineModel:
    """Synthetic stage costs in this pipeline's shape (a per-row map after a cheap read)."""
    return PipelineModel(NAME, (
        StageModel("read", 0.5e-6, wait_s_per_row=0.7e-6, bytes_per_row=60, threads_knob="read",
                   threads_cap_knob="cycle", async_cpu_s_per_call=0.5e-6),
        StageModel("parse", 5.5e-6, bytes_per_row=40, threads_knob="parse", async_cpu_s_per_call=1.2e-6),
        StageModel("batch", 0.3e-6, 3e-6, bytes_per_row=40, batched=True),
        StageModel("prefetch", 0.01e-6, 2e-6, bytes_per_row=40, buffer_knob="prefetch", batched=True),
    ), default_batch=BATCH, base_mb=400.0, burstiness=0.2, oversub_overhead=0.06, source="synthetic (suite)")


def generate(out: str | Path, seed: int = 0, rows: int = 16_000, shards: int = 4) -> Path:
    rng = np.random.default_rng(seed)

    def lines(n: int) -> list[str]:
        ts = np.cumsum(rng.integers(1, 50, n))
        values = np.round(rng.normal(20.0, 5.0, (n, 6)), 2)
        return [",".join([str(int(ts[i])), f"s{i % 97}", *map(str, values[i])]) for i in range(n)]

    return write_shards(out, NAME, ".csv", [text_writer(lines(rows // shards)) for _ in range(shards)],
                        {"rows": rows, "shards": shards, "seed": seed})


def make_spec(data_dir: str, node: NodeFields | Node | None = None) -> "PipelineSpec":
    from ingestion.pipeline import PipelineSpec

    n = node_of(node)
    files = shard_files(data_dir, ".csv", NAME)

    def build(c: Config):
        import tensorflow as tf

        defaults = [[0], [""]] + [[0.0]] * 6
        cycle = c["cycle"] if c["cycle"] > 0 else tf.data.AUTOTUNE
        read = c["read"] if c["read"] <= 0 or c["cycle"] <= 0 else min(c["read"], c["cycle"])
        ds = tf.data.Dataset.from_tensor_slices(files).repeat().interleave(
            tf.data.TextLineDataset, cycle_length=cycle, num_parallel_calls=par(read), deterministic=det(read))

        def parse(line):
            cols = tf.io.decode_csv(line, defaults)
            return {"ts": cols[0], "sensor": cols[1], "values": tf.stack(cols[2:])}

        ds = ds.map(parse, num_parallel_calls=par(c["parse"]), deterministic=det(c["parse"])).batch(BATCH, drop_remainder=True)
        return finish(ds.prefetch(buffer(c["prefetch"])), c, n)

    return PipelineSpec(NAME, build, space(n), rows_per_element=BATCH, factory=f"{__name__}:make_spec",
                        factory_kwargs={"data_dir": str(data_dir), "node": node_fields(n)},
                        autotunable=("cycle", "read", "parse", "prefetch"))
