"""Measure this node's per-vCPU stage rates of the DLRM pipeline and record them for its instance type.

``trainwise ingest node-speed --instance-type TYPE`` pins itself to one CPU, times each prefix of
the built-in DLRM pipeline (``ingestion.cluster.pipelines``' TSV data) with every parallelism knob
at its smallest value (``ingestion.measure.profile_stages``, as ``ingestion.calibrate`` does) and
turns the prefix rates into per-stage rates (``ingestion.calibrate.stage_costs_from_prefixes``).
The record, ``data/node_speed/<TYPE>.json``, has ``source: measured``, the machine (CPU model),
the date, the per-stage rows/s and the whole pipeline's rows/s on one vCPU. Once a type of a
reference family and a type of another family are recorded, that family's speed factor is the
ratio of their rates (:func:`ingestion.cluster.instances.family_speeds`).
"""

from __future__ import annotations

import datetime
import json
import os
import platform
from pathlib import Path

from core.errors import UserError
from ingestion.cluster.instances import SPEEDS, NodeSpeedRecord, by_name, local_type

#: ``--instance-type local``: this machine as the live loop's local node (family ``local``).
LOCAL = "local"


def cpu_model() -> str:
    """The CPU's model name (``/proc/cpuinfo``), else what ``platform`` knows."""
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.lower().startswith(("model name", "cpu model")):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def family_of(instance_type: str) -> str:
    """The family of ``instance_type`` (``local`` for this machine); an unknown type is a UserError."""
    return "local" if instance_type == LOCAL else by_name(instance_type).family


def measure(instance_type: str, window_s: float = 1.0, repeats: int = 3) -> NodeSpeedRecord:
    """The node-speed record of this machine as ``instance_type`` (measured, on one pinned CPU)."""
    from ingestion.calibrate import sequential_config, stage_costs_from_prefixes
    from ingestion.cluster.pipelines import BATCH, _data
    from ingestion.dlrm import dlrm_spec
    from ingestion.measure import profile_stages

    if window_s <= 0 or repeats < 1:
        raise UserError(f"--seconds must be > 0 (got {window_s:g}) and --repeats >= 1 (got {repeats})")
    family = family_of(instance_type)
    cpus = sorted(os.sched_getaffinity(0))
    spec = dlrm_spec(_data("tsv"), "tsv", local_type(1).node(), (BATCH,))
    config = sequential_config(spec.space)
    try:
        os.sched_setaffinity(0, {cpus[-1]})
        prefixes = profile_stages(spec, config, warmup_s=0.5, window_s=window_s, repeats=repeats)
    finally:
        os.sched_setaffinity(0, set(cpus))
    costs = stage_costs_from_prefixes(list(spec.stages), prefixes)
    return {"instance_type": instance_type, "family": family, "source": "measured", "machine": cpu_model(),
            "arch": platform.machine(), "date": datetime.date.today().isoformat(), "pipeline": "dlrm-tsv",
            "config": dict(config), "window_s": window_s, "repeats": repeats,
            "prefix_rows_per_s": prefixes, "stage_rows_per_s": {s: 1.0 / c for s, c in costs.items()},
            "rows_per_s_per_vcpu": prefixes[spec.stages[-1]],
            "note": "one pinned CPU; other processes on the machine slow it, so a busy machine reads slow"}


def record(doc: NodeSpeedRecord, speeds_dir: Path = SPEEDS) -> Path:
    """Write ``doc`` as ``<speeds_dir>/<instance_type>.json`` (atomically)."""
    from core.atomic import write_text

    return write_text(speeds_dir / f"{doc['instance_type']}.json", json.dumps(doc, indent=1, sort_keys=True) + "\n")
