"""The cluster model: what a pool of nodes delivers to several training jobs, and what it costs.

A *unit* is one node of an instance type, or a half or a quarter of one (its own vCPUs and a
proportional share of RAM, as a worker process pinned to those CPUs has): several jobs may
share a node that way. On a node of one vCPU (a local node, ``min_unit_vcpus`` below 1), half a
node is a worker process that shares the CPU with another job's: it gets half the CPU's time
(``Unit.time_share``), so the model gives it half the rows of a one-vCPU node. A job's nodes each run the job's pipeline with their own configuration
(the knobs of the pipeline's :class:`~ingestion.knobs.KnobSpace` on that unit).

Per node, the calibrated single-node simulator (:func:`ingestion.simulator.simulate`) gives the
pipeline's rows/s for a configuration; the cluster model composes them:

* each worker delivers ``worker_efficiency`` of what the pipeline makes in-process (the
  tf.data service's serialisation and transfer, measured on loopback runs), and at most what the
  node's network carries (``network_gbps`` of the instance type times ``network_efficiency``,
  over the job's ``wire_bytes_per_row``);
* a job receives the sum of its nodes' rows and is *fed* when that meets its demand; it
  consumes no more than its demand, so ``delivered = min(supply, demand)``;
* the pool pays for whole nodes: per instance type, the units assigned pack into
  ``ceil(sum of shares)`` nodes (halves and quarters pack exactly), at the type's hourly price;
* a family's vCPU runs the CPU stages ``speeds[family]`` times as fast as the reference vCPU the
  pipelines' costs are given in (``ingestion.cluster.instances.family_speeds``: measured where
  measured, else the table's assumed factor): on its units every CPU cost is divided by it.

Figures from this model are labelled ``simulated``.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Mapping, TypedDict

import numpy as np

from core.errors import UserError
from ingestion.cluster.instances import InstanceType, nominal_speeds
from ingestion.cluster.jobs import Job, JobsFile
from ingestion.cluster.pipelines import REAL_PIPELINES
from ingestion.knobs import Config, KnobSpace
from ingestion.node import Node
from ingestion.simulator import PipelineModel, dlrm_like_space, random_pipeline, simulate

OVERHEADS = Path(__file__).with_name("data") / "service_overheads.json"
FRACTIONS = (1.0, 0.5, 0.25)
MIN_UNIT_VCPUS = 2


@dataclass(frozen=True)
class ServiceOverheads:
    """What the tf.data service costs over an in-process pipeline (``source`` says how it was obtained)."""

    worker_efficiency: float = 0.9
    network_efficiency: float = 0.8
    source: str = "assumed"

    @classmethod
    def load(cls, path: Path = OVERHEADS) -> "ServiceOverheads":
        if not path.is_file():
            return cls()
        doc = json.loads(path.read_text())
        return cls(float(doc["worker_efficiency"]), float(doc.get("network_efficiency", 0.8)), str(doc.get("source", path.name)))


@dataclass(frozen=True)
class Unit:
    """A node of ``itype``, or the share ``fraction`` of one."""

    itype: InstanceType
    fraction: float = 1.0

    @property
    def vcpus(self) -> int:
        return max(1, int(round(self.itype.vcpus * self.fraction)))

    @property
    def time_share(self) -> float:
        """The share of its vCPUs' time the unit gets: below 1 only for a unit smaller than one vCPU."""
        return min(1.0, self.itype.vcpus * self.fraction)

    @property
    def usd_per_hour(self) -> float:
        return self.itype.usd_per_hour * self.fraction

    @property
    def node(self) -> Node:
        return self.itype.node(self.fraction)

    @property
    def label(self) -> str:
        return self.itype.name if self.fraction == 1.0 else f"{self.itype.name}:{self.fraction:g}"


@dataclass(frozen=True)
class JobModel:
    """One training job as the model sees it: its demand and its pipeline."""

    name: str
    demand_rows_per_s: float
    pipeline: PipelineModel
    space_of: Callable[[Node], KnobSpace]
    wire_bytes_per_row: float = 320.0

    @property
    def key(self) -> str:
        """Identifies the pipeline (per-node results are shared between jobs with equal keys)."""
        return json.dumps(self.pipeline.to_json(), sort_keys=True)


@dataclass(frozen=True)
class NodeSlot:
    """One unit assigned to a job with its pipeline configuration."""

    unit: Unit
    config: Config


@dataclass
class ClusterResult:
    """What an assignment delivers, per job and in all (``label`` simulated or measured)."""

    supply: dict[str, float]
    demand: dict[str, float]
    usd_per_h: float
    nodes: dict[str, int]
    oom: int
    label: str = "simulated"

    @property
    def fed(self) -> dict[str, bool]:
        return {j: self.supply[j] >= self.demand[j] * (1 - 1e-9) for j in self.demand}

    @property
    def all_fed(self) -> bool:
        return all(self.fed.values())

    @property
    def delivered(self) -> float:
        return sum(min(self.supply[j], self.demand[j]) for j in self.demand)

    @property
    def throughput_per_usd(self) -> float:
        """Rows delivered per dollar (rows/s x 3,600 / $/h)."""
        return self.delivered * 3600.0 / self.usd_per_h if self.usd_per_h > 0 else 0.0

    def summary(self) -> ClusterSummary:
        return {"label": self.label, "all_fed": self.all_fed, "throughput_per_usd": self.throughput_per_usd,
                "usd_per_h": self.usd_per_h, "delivered_rows_per_s": self.delivered,
                "nodes": sum(self.nodes.values()), "nodes_by_type": dict(self.nodes), "oom": self.oom,
                "jobs": {j: {"supply_rows_per_s": self.supply[j], "demand_rows_per_s": self.demand[j],
                             "fed": self.fed[j]} for j in self.demand}}


def nodes_by_type(shares: Mapping[str, float]) -> dict[str, int]:
    """Whole nodes per type for the summed unit shares (halves and quarters pack exactly)."""
    return {t: int(math.ceil(s - 1e-9)) for t, s in shares.items() if s > 1e-9}


class JobSupply(TypedDict):
    supply_rows_per_s: float
    demand_rows_per_s: float
    fed: bool


class ClusterSummary(TypedDict):
    """A :class:`ClusterResult` as result files carry it."""

    label: str
    all_fed: bool
    throughput_per_usd: float
    usd_per_h: float
    delivered_rows_per_s: float
    nodes: int
    nodes_by_type: dict[str, int]
    oom: int
    jobs: dict[str, JobSupply]


@dataclass
class ClusterModel:
    jobs: list[JobModel]
    types: list[InstanceType]
    max_nodes: int
    budget_usd_per_h: float | None = None
    overheads: ServiceOverheads = field(default_factory=ServiceOverheads)
    fractions: tuple[float, ...] = FRACTIONS
    min_unit_vcpus: float = MIN_UNIT_VCPUS
    speeds: dict[str, float] = field(default_factory=nominal_speeds)
    _scaled: dict[tuple[str, float], PipelineModel] = field(default_factory=dict, init=False, repr=False)

    def job(self, name: str) -> JobModel:
        for j in self.jobs:
            if j.name == name:
                return j
        raise KeyError(name)

    def units(self) -> list[Unit]:
        """Every unit a plan may use: whole nodes and the halves and quarters with at least
        ``min_unit_vcpus`` vCPUs, whole vCPUs each (or a time-shared part of one vCPU)."""
        out = []
        for t in self.types:
            for f in self.fractions:
                v = t.vcpus * f
                if v >= self.min_unit_vcpus - 1e-9 and (abs(v - round(v)) < 1e-9 or v < 1):
                    out.append(Unit(t, f))
        return out

    def space(self, job: JobModel, unit: Unit) -> KnobSpace | None:
        """The job's knob space on ``unit``, or None if its pipeline cannot run there."""
        try:
            return job.space_of(unit.node)
        except UserError:
            return None

    def speed(self, unit: Unit) -> float:
        """The unit's family's vCPU speed over the reference vCPU (1 for a family without an entry)."""
        return float(self.speeds.get(unit.itype.family, 1.0))

    def pipeline_on(self, job: JobModel, unit: Unit) -> PipelineModel:
        """The job's pipeline as the unit's vCPUs run it: CPU costs over the family's speed."""
        factor = self.speed(unit)
        if factor == 1.0:
            return job.pipeline
        key = (job.key, factor)
        if key not in self._scaled:
            from ingestion.calibrate import scale_cpu

            self._scaled[key] = scale_cpu(job.pipeline, 1.0 / factor)
        return self._scaled[key]

    def network_cap(self, job: JobModel, unit: Unit) -> float:
        bits = unit.itype.network_gbps * 1e9 * unit.fraction * self.overheads.network_efficiency
        return bits / 8.0 / job.wire_bytes_per_row

    def node_rows_per_s(self, job: JobModel, unit: Unit, config: Mapping[str, int]) -> tuple[float, bool]:
        """(rows/s the node delivers to the job's trainers, out of memory) for ``config``."""
        m = simulate(self.pipeline_on(job, unit), config, unit.node)
        if m.failed:
            return 0.0, True
        rows = m.rows_per_s * unit.time_share * self.overheads.worker_efficiency
        return min(rows, self.network_cap(job, unit)), False

    def evaluate(self, assignment: Mapping[str, list[NodeSlot]]) -> ClusterResult:
        supply = {j.name: 0.0 for j in self.jobs}
        shares: dict[str, float] = {}
        oom = 0
        for name, slots in assignment.items():
            job = self.job(name)
            for slot in slots:
                rows, failed = self.node_rows_per_s(job, slot.unit, slot.config)
                oom += int(failed)
                supply[name] += rows
                shares[slot.unit.itype.name] = shares.get(slot.unit.itype.name, 0.0) + slot.unit.fraction
        nodes = nodes_by_type(shares)
        price = {t.name: t.usd_per_hour for t in self.types}
        usd = sum(n * price[t] for t, n in nodes.items())
        return ClusterResult(supply, {j.name: j.demand_rows_per_s for j in self.jobs}, usd, nodes, oom)


def synthetic_job(name: str, demand: float, kind: str, seed: int, wire_bytes_per_row: float = 320.0) -> JobModel:
    """A job whose pipeline is the simulator's synthetic DLRM-like pipeline of ``kind`` (read/parse/transform)."""
    model = random_pipeline(np.random.default_rng(seed), kind, name=f"{kind}-bound-s{seed}")  # type: ignore[arg-type]
    return JobModel(name, demand, model, dlrm_like_space, wire_bytes_per_row)


def profiled_job(job: Job, path: Path) -> JobModel:
    """A job whose pipeline is the real DLRM pipeline's calibration (a JSON from ``ingestion.calibrate``)."""
    from ingestion.calibrate import Calibration
    from ingestion.dlrm import dlrm_knob_space

    try:
        calibration = Calibration.from_json(json.loads(path.read_text()))
    except (ValueError, KeyError, TypeError) as exc:
        raise UserError(f"profile {path}: not a pipeline calibration ({exc})") from None
    batch = int(calibration.profile_config.get("batch_size", 4096))
    return JobModel(job.name, job.demand_rows_per_s, calibration.model,
                    lambda node: dlrm_knob_space(node, batch_sizes=(batch,)), job.wire_bytes_per_row)


def real_job(job: Job) -> JobModel:
    """A job whose pipeline is a real one (``ingestion.cluster.pipelines``), modelled by its calibration."""
    from ingestion.cluster.pipelines import BATCH, real_pipeline
    from ingestion.dlrm import dlrm_knob_space

    model = real_pipeline(job.pipeline).calibration.model
    return JobModel(job.name, job.demand_rows_per_s, model,
                    lambda node: dlrm_knob_space(node, batch_sizes=(BATCH,)), job.wire_bytes_per_row)


def from_jobs_file(spec: JobsFile, types: list[InstanceType], *, base_dir: Path | None = None,
                   budget_usd_per_h: float | None = None, overheads: ServiceOverheads | None = None) -> ClusterModel:
    """The cluster model of a validated jobs file on the given instance types."""
    jobs = []
    for job in spec.jobs:
        if job.demand_rows_per_s == "measure":
            raise UserError(f"job {job.name}: demand 'measure' must be measured first (ingestion.cluster.trainer.resolve_demands)")
        if job.pipeline in REAL_PIPELINES:
            jobs.append(real_job(job))
        elif job.pipeline == "profile":
            path = Path(job.profile or "")
            if not path.is_file() and base_dir is not None:
                path = base_dir / path
            jobs.append(profiled_job(job, path))
        else:
            kind = job.pipeline.removesuffix("-bound")
            jobs.append(synthetic_job(job.name, job.demand_rows_per_s, kind, job.seed, job.wire_bytes_per_row))
    budget = budget_usd_per_h if budget_usd_per_h is not None else spec.budget_usd_per_h
    return ClusterModel(jobs, list(types), spec.pool.max_nodes, budget, overheads or ServiceOverheads.load())
