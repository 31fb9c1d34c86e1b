"""A suite of tunable tf.data pipelines of different shapes, each with its own data generator.

Each member is a pipeline written with the public API (:class:`~ingestion.pipeline.PipelineSpec`
+ :class:`~ingestion.knobs.KnobSpace`), as a user writes one, plus what a benchmark needs around
it: a data generator, a simulator model of the same shape (synthetic stage costs, for
``--simulate`` runs), and its role. ``train`` members are the ones InTune's design and settings
were chosen on; ``heldout`` members are reported as pipelines it has not seen.

========================  =========  ==========================================================
member                    role       shape
========================  =========  ==========================================================
``dlrm-tsv``              train      the built-in DLRM pipeline; cycle + read, parse, transform
``wide-tfrecord``         train      TFRecord, wide rows, parse-bound, batch knob, no cycle
``rowmap-csv``            train      CSV, per-row map (no batch knob), cycle capped by builder
``clicks-csv``            heldout    CSV, small rows, read-bound; read > cycle is rejected
``text-hash``             heldout    TSV text, transform-bound (split, n-grams, hashing), batch
``shuffle-heavy``         heldout    TFRecord, 4 KB rows, a shuffle buffer that can run out of RAM
========================  =========  ==========================================================

The simulator models and ``rejects`` (the rule tf.data applies, for the simulator) are for
benchmarks only: no optimizer is given them. InTune sees a *belief*: in a live run its own
calibration of the pipeline, in a simulated run a perturbed copy of the model.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Literal, Mapping

import numpy as np

from core.errors import UserError
from ingestion.knobs import Config, KnobSpace
from ingestion.measurement import Measurement
from ingestion.node import Node
from ingestion.pipelines import clicks_csv, dlrm_tsv, rowmap_csv, shuffle_heavy, text_hash, wide_tfrecord
from ingestion.simulator import PipelineModel, simulate

Role = Literal["train", "heldout"]


def _accepts(config: Mapping[str, int]) -> str | None:
    return None


@dataclass(frozen=True)
class SuiteMember:
    """One pipeline of the suite and what a benchmark needs around it."""

    name: str
    role: Role
    shape: str
    space: Callable[[Node], KnobSpace]
    model: Callable[[KnobSpace], PipelineModel]
    generate: Callable[..., Path]
    factory: str
    rejects: Callable[[Mapping[str, int]], str | None] = _accepts

    def spec(self, data_dir: str | Path, node: Node):
        """The member's :class:`~ingestion.pipeline.PipelineSpec` over ``data_dir`` on ``node``."""
        from ingestion.pipeline import spec_from_reference
        from ingestion.node import node_fields

        return spec_from_reference({"factory": self.factory, "kwargs": {"data_dir": str(data_dir), "node": node_fields(node)}})

    def simulate(self, model: PipelineModel, config: Mapping[str, int], node: Node, *, noise: float = 0.0,
                 rng: np.random.Generator | None = None) -> Measurement:
        """``config`` on the simulator, failing as the live pipeline does when tf.data rejects it."""
        reason = self.rejects(config)
        if reason is not None:
            return Measurement(rows_per_s=0.0, failed=True, label="simulated", extra={"failure": reason, "config": dict(config)})
        m = simulate(model, config, node, noise=noise, rng=rng)
        return m if not m.failed else Measurement(0.0, m.peak_rss_mb, True, "simulated", {**dict(m.extra), "failure": "memory limit"})


def _member(module, role: Role, shape: str) -> SuiteMember:
    return SuiteMember(module.NAME, role, shape, module.space, module.model, module.generate,
                       f"{module.__name__}:make_spec", getattr(module, "rejects", _accepts))


SUITE: tuple[SuiteMember, ...] = (
    _member(dlrm_tsv, "train", "built-in DLRM (TSV): interleave cycle + read, parse, transform, shuffle"),
    _member(wide_tfrecord, "train", "TFRecord, wide rows, parse-bound, batch knob, no cycle"),
    _member(rowmap_csv, "train", "CSV, per-row map without a batch knob; cycle capped by the builder"),
    _member(clicks_csv, "heldout", "CSV, small rows, read-bound; read > cycle is rejected by tf.data"),
    _member(text_hash, "heldout", "TSV text, transform-bound (split, n-grams, hashing), batch knob"),
    _member(shuffle_heavy, "heldout", "TFRecord, 4 KB rows, memory-hungry shuffle (largest buffer OOMs)"),
)
NAMES = tuple(m.name for m in SUITE)
HELD_OUT = tuple(m.name for m in SUITE if m.role == "heldout")


def member(name: str) -> SuiteMember:
    for m in SUITE:
        if m.name == name:
            return m
    raise UserError(f"unknown suite pipeline {name!r}; allowed: {', '.join(NAMES)}")


def members(role: Role | None = None) -> tuple[SuiteMember, ...]:
    """The suite's members, all or those of one role."""
    return tuple(m for m in SUITE if role is None or m.role == role)


def suite_node(vcpus: int, ram_gib: float = 3.0) -> Node:
    """The node the suite runs on: ``vcpus`` cores and a small RAM (its budget is half of it), so the
    memory-hungry shuffle's largest buffer runs out of memory on any machine."""
    return Node(name=f"suite-{vcpus}vcpu", vcpus=vcpus, ram_gib=ram_gib)
