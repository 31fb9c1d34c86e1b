"""Click logs in CSV, small rows, read-bound; some configurations are invalid.

``read -> batch(1024) -> parse (decode_csv) -> prefetch``. The read stage interleaves one
``TextLineDataset`` per file: ``cycle`` files open at once (a knob of kind ``other``) and ``read``
parallel calls (``cpu``, limited by ``cycle``). The builder passes both to tf.data as written, and
tf.data rejects ``num_parallel_calls`` above a fixed ``cycle_length`` (``InvalidArgumentError``):
such configurations fail when built, as they would in a user's own pipeline, and an optimizer has
to learn to avoid them.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Mapping

import numpy as np

from ingestion.knobs import Config, Knob, KnobSpace
from ingestion.node import Node, NodeFields, node_fields, node_of
from ingestion.pipelines._common import (buffer, det, finish, par, parallelism, shard_files,
                                         text_writer, write_shards)
from ingestion.simulator import PipelineModel, StageModel

if TYPE_CHECKING:  # pragma: no cover
    from ingestion.pipeline import PipelineSpec

NAME = "clicks-csv"
BATCH = 1024
COLUMNS = 12  # label, 8 floats, 3 small integers


def space(node: Node) -> KnobSpace:
    return KnobSpace((
        Knob("cycle", (1, 2, 4), kind="other", stage="read", default=1),
        Knob("read", parallelism(node), kind="cpu", stage="read", default=0, limited_by="cycle"),
        Knob("parse", parallelism(node), kind="cpu", stage="parse", default=0),
        Knob("prefetch", (1, 4), kind="buffer", stage="prefetch", default=1),
    ), cpu_budget=node.vcpus, name=NAME)


def rejects(config: Mapping[str, int]) -> str | None:
    """tf.data's rule for this pipeline (for the simulator only; no optimizer is told it)."""
    if config["cycle"] > 0 and config["read"] > config["cycle"]:
        return (f"pipeline error: InvalidArgumentError: num_parallel_calls ({config['read']}) must be at most "
                f"cycle_length ({config['cycle']})")
    return None


def model(space: KnobSpace) -> PipelineModel:
    """Synthetic stage costs in this pipeline's shape (per-row elements through interleave)."""
    return PipelineModel(NAME, (
        StageModel("read", 0.9e-6, wait_s_per_row=2.6e-6, bytes_per_row=70, threads_knob="read",
                   threads_cap_knob="cycle", async_cpu_s_per_call=0.6e-6,
                   cost_factors={"cycle": {1: 1.0, 2: 0.93, 4: 0.9}}),
        StageModel("batch", 0.08e-6, 4e-6, bytes_per_row=70, batched=True),
        StageModel("parse", 1.1e-6, 40e-6, bytes_per_row=50, threads_knob="parse", batched=True),
        StageModel("prefetch", 0.01e-6, 2e-6, bytes_per_row=50, buffer_knob="prefetch", batched=True),
    ), default_batch=BATCH, base_mb=420.0, burstiness=0.15, oversub_overhead=0.05, source="synthetic (suite)")


def generate(out: str | Path, seed: int = 0, rows: int = 32_000, shards: int = 8) -> Path:
    rng = np.random.default_rng(seed)

    def lines(n: int) -> list[str]:
        label = rng.random(n) < 0.25
        floats = np.round(rng.lognormal(0.0, 1.0, (n, 8)), 3)
        ints = rng.integers(0, 1000, (n, 3))
        return [",".join([str(int(label[i])), *map(str, floats[i]), *map(str, ints[i])]) for i in range(n)]

    return write_shards(out, NAME, ".csv", [text_writer(lines(rows // shards)) for _ in range(shards)],
                        {"rows": rows, "shards": shards, "seed": seed})


def make_spec(data_dir: str, node: NodeFields | Node | None = None) -> "PipelineSpec":
    from ingestion.pipeline import PipelineSpec

    n = node_of(node)
    files = shard_files(data_dir, ".csv", NAME)

    def build(c: Config):
        import tensorflow as tf

        defaults = [[0]] + [[0.0]] * 8 + [[0]] * 3
        ds = tf.data.Dataset.from_tensor_slices(files).repeat().interleave(
            tf.data.TextLineDataset, cycle_length=c["cycle"] if c["cycle"] > 0 else tf.data.AUTOTUNE,
            num_parallel_calls=par(c["read"]), deterministic=det(c["read"]))
        ds = ds.batch(BATCH, drop_remainder=True)
        ds = ds.map(lambda x: tf.io.decode_csv(x, defaults), num_parallel_calls=par(c["parse"]), deterministic=det(c["parse"]))
        return finish(ds.prefetch(buffer(c["prefetch"])), c, n)

    return PipelineSpec(NAME, build, space(n), rows_per_element=BATCH, factory=f"{__name__}:make_spec",
                        factory_kwargs={"data_dir": str(data_dir), "node": node_fields(n)},
                        autotunable=("cycle", "read", "parse", "prefetch"))
