"""The built-in DLRM pipeline (:mod:`ingestion.dlrm`) on Criteo-format TSV, as a suite member.

``read (interleave: cycle_length, read_parallelism) -> shuffle -> batch -> parse (decode_csv) ->
transform (hashing, log) -> prefetch``; data from :func:`ingestion.datagen.generate`.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from ingestion.dlrm import dlrm_knob_space
from ingestion.knobs import KnobSpace
from ingestion.node import Node, NodeFields, node_fields, node_of
from ingestion.pipelines._common import MARKER
from ingestion.simulator import PipelineModel, StageModel

if TYPE_CHECKING:  # pragma: no cover
    from ingestion.pipeline import PipelineSpec

NAME = "dlrm-tsv"


def space(node: Node) -> KnobSpace:
    return dlrm_knob_space(node)


def model(space: KnobSpace) -> PipelineModel:
    """Synthetic stage costs in the DLRM pipeline's shape (parse and transform about equal)."""
    return PipelineModel(NAME, (
        StageModel("read", 0.9e-6, wait_s_per_row=0.6e-6, bytes_per_row=200, threads_knob="read_parallelism",
                   threads_cap_knob="cycle_length", async_cpu_s_per_call=0.5e-6,
                   cost_factors={"cycle_length": {1: 1.0, 4: 0.92}}),
        StageModel("shuffle", 0.2e-6, bytes_per_row=200, buffer_knob="shuffle_buffer",
                   cost_deltas={"shuffle_buffer": {1024: 0.0, 8192: 0.05e-6}}),
        StageModel("batch", 0.1e-6, 5e-6, bytes_per_row=200, batched=True),
        StageModel("parse", 5.0e-6, 100e-6, bytes_per_row=330, threads_knob="parse_parallelism", batched=True),
        StageModel("transform", 5.2e-6, 150e-6, bytes_per_row=330, threads_knob="transform_parallelism", batched=True),
        StageModel("prefetch", 0.01e-6, 2e-6, bytes_per_row=330, buffer_knob="prefetch_buffer", batched=True),
    ), batch_knob="batch_size", default_batch=4096, base_mb=450.0, burstiness=0.15, oversub_overhead=0.05,
        source="synthetic (suite)")


def generate(out: str | Path, seed: int = 0, rows: int = 100_000) -> Path:
    import json

    from core.atomic import write_text
    from ingestion.datagen import generate as criteo

    d = Path(out)
    if not (d / MARKER).is_file():
        criteo(rows, "tsv", d, seed=seed)
        write_text(d / MARKER, json.dumps({"pipeline": NAME, "rows": rows, "seed": seed}))
    return d


def make_spec(data_dir: str, node: NodeFields | Node | None = None) -> "PipelineSpec":
    from ingestion.dlrm import dlrm_spec

    return dlrm_spec(data_dir, "tsv", node_fields(node_of(node)))  # named "dlrm-tsv" by dlrm_spec
