"""The real pipelines a jobs file may name, so its jobs can run on tf.data service workers.

``pipeline: dlrm-tsv`` (or ``dlrm-tfrecord``) is the built-in DLRM pipeline (``ingestion.dlrm``)
on synthetic Criteo rows (``ingestion.datagen``: ``ROWS`` rows in ``SHARDS`` shards, seed 0,
generated once into ``core.paths.cache_dir("intunex-data")``), batches of ``BATCH`` rows. Its
cluster model is the single-node simulator calibrated on it for a node of one CPU
(``ingestion.calibrate``: about a minute the first time on 2 cores, cached afterwards).
"""

from __future__ import annotations

import shutil
from dataclasses import dataclass
from functools import lru_cache
from typing import Any

from ingestion.cluster.instances import local_type
from ingestion.node import Node

REAL_PIPELINES = {"dlrm-tsv": "tsv", "dlrm-tfrecord": "tfrecord"}
ROWS = 40_000
SHARDS = 8
BATCH = 1024
CALIBRATION_BUDGET_S = 90.0


@dataclass(frozen=True)
class RealPipeline:
    """A real pipeline (its :class:`~ingestion.pipeline.PipelineSpec`) and its calibration on ``node``."""

    name: str
    spec: Any
    calibration: Any
    node: Node


def _data(fmt: str) -> str:
    from core.paths import cache_dir
    from ingestion.datagen import MANIFEST, generate

    path = cache_dir("intunex-data") / fmt
    if not (path / MANIFEST).is_file():
        shutil.rmtree(path, ignore_errors=True)
        generate(ROWS, fmt, path, shards=SHARDS)
    return str(path)


@lru_cache(maxsize=4)
def real_pipeline(name: str) -> RealPipeline:
    """The pipeline ``name`` (a key of ``REAL_PIPELINES``), its data generated and its model calibrated."""
    from ingestion.calibrate import calibrate
    from ingestion.dlrm import dlrm_spec

    fmt = REAL_PIPELINES[name]
    node = local_type(1).node()
    spec = dlrm_spec(_data(fmt), fmt, node, (BATCH,))
    return RealPipeline(name, spec, calibrate(spec, node, time_budget_s=CALIBRATION_BUDGET_S, window_s=0.5), node)
