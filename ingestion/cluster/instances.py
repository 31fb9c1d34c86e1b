"""The instance-type table: vCPUs, RAM, network and on-demand price of each EC2 type.

The table is a versioned JSON file (``data/instances.json``) with its sources and the date its
prices were read, like ``serverless/data/prices.json``. ``select`` picks the types a plan may use
from patterns such as ``c7i.*`` or ``c7g.2xlarge``.

Each family's vCPU speed relative to the reference vCPU (a 4th gen Intel Xeon, the processor of
c7i, m7i and r7i) is a :class:`FamilySpeed`: a factor with its source and an uncertainty band.
The table's entries are ``reference`` or ``assumed``; a ``measured`` one replaces an entry when
``trainwise ingest node-speed`` has recorded a type of that family and a type of a reference
family (``data/node_speed/<type>.json``): the factor is the ratio of their measured per-vCPU rates.
"""

from __future__ import annotations

import fnmatch
import json
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import Iterable, TypedDict

from core.errors import UserError
from ingestion.node import Node

TABLE = Path(__file__).with_name("data") / "instances.json"
SPEEDS = Path(__file__).with_name("data") / "node_speed"
#: The types a plan may use when the user names none: three sizes of four families.
DEFAULT_TYPES = ("c7i.xlarge", "c7i.2xlarge", "c7i.4xlarge", "c7g.xlarge", "c7g.2xlarge", "c7g.4xlarge",
                 "m7i.xlarge", "m7i.2xlarge", "m7i.4xlarge", "r7i.xlarge", "r7i.2xlarge", "r7i.4xlarge")


@dataclass(frozen=True)
class InstanceType:
    name: str
    family: str
    arch: str
    vcpus: int
    ram_gib: float
    usd_per_hour: float
    network_gbps: float

    def node(self, fraction: float = 1.0) -> Node:
        """The node (or the share ``fraction`` of it, with as many vCPUs and as much RAM) as the
        single-node simulator sees it; a share smaller than one vCPU runs on one (time-shared)."""
        vcpus = max(1, int(round(self.vcpus * fraction)))
        return Node(name=self.name if fraction == 1.0 else f"{self.name}/{vcpus}vcpu", vcpus=vcpus,
                    ram_gib=self.ram_gib * fraction, hourly_usd=self.usd_per_hour * fraction)


class FamilySpeedEntry(TypedDict):
    """A family's speed as the table (and a result file) holds it."""

    factor: float
    band: list[float]  # [low, high]
    source: str  # reference, assumed or measured
    basis: str
    date: str


class TableFacts(TypedDict):
    """The table's version, date, region, pricing basis and sources."""

    version: str
    retrieved: str
    region: str
    pricing: str
    sources: dict[str, str]


class TableHeader(TableFacts):
    """The table file's fields besides its instance types."""

    currency: str
    notes: str
    families: dict[str, str]
    family_speed: dict[str, FamilySpeedEntry | str]  # "_about" and other "_" keys hold prose


class TableInfo(TableFacts):
    """The table's facts and its family speeds (measured where measured), as result files carry them."""

    family_speed: dict[str, FamilySpeedEntry]


class NodeSpeedRecord(TypedDict):
    """A measured node speed (``data/node_speed/<type>.json``, written by ``trainwise ingest node-speed``)."""

    instance_type: str
    family: str
    source: str  # measured
    machine: str  # the CPU's model name
    arch: str
    date: str
    pipeline: str
    config: dict[str, int]
    window_s: float
    repeats: int
    prefix_rows_per_s: dict[str, float]
    stage_rows_per_s: dict[str, float]
    rows_per_s_per_vcpu: float
    note: str


@lru_cache(maxsize=4)
def _load(path: str) -> tuple[TableHeader, tuple[InstanceType, ...]]:
    doc = json.loads(Path(path).read_text())
    fields = InstanceType.__dataclass_fields__
    types = tuple(InstanceType(**{k: v for k, v in t.items() if k in fields}) for t in doc.pop("instance_types"))
    return doc, types


@dataclass(frozen=True)
class FamilySpeed:
    """A family's per-vCPU speed over the reference vCPU, and the band it may lie in."""

    family: str
    factor: float
    low: float
    high: float
    source: str
    basis: str
    date: str

    def to_json(self) -> FamilySpeedEntry:
        return {"factor": self.factor, "band": [self.low, self.high], "source": self.source, "basis": self.basis,
                "date": self.date}


def _measured_records(speeds_dir: Path) -> dict[str, NodeSpeedRecord]:
    """Per family, the first measured record (sorted by file name)."""
    out: dict[str, NodeSpeedRecord] = {}
    for path in sorted(speeds_dir.glob("*.json")) if speeds_dir.is_dir() else []:
        doc = json.loads(path.read_text())
        out.setdefault(str(doc["family"]), doc)
    return out


def family_speeds(path: Path = TABLE, speeds_dir: Path = SPEEDS) -> dict[str, FamilySpeed]:
    """Every family's speed: the table's entry, or the measured ratio to a measured reference family."""
    info, _ = _load(str(path))
    out = {f: FamilySpeed(f, float(e["factor"]), float(e["band"][0]), float(e["band"][1]), str(e["source"]),
                          str(e["basis"]), str(e["date"]))
           for f, e in info.get("family_speed", {}).items() if not f.startswith("_") and not isinstance(e, str)}
    records = _measured_records(speeds_dir)
    reference = next((records[f] for f, s in out.items() if s.source == "reference" and f in records), None)
    for family, doc in records.items():
        if reference is not None and family in out and doc is not reference:
            factor = float(doc["rows_per_s_per_vcpu"]) / float(reference["rows_per_s_per_vcpu"])
            out[family] = FamilySpeed(family, factor, factor, factor, "measured",
                                      f"{doc['instance_type']} ({doc['machine']}) over {reference['instance_type']} "
                                      f"({reference['machine']})", str(doc["date"]))
    return out


def nominal_speeds(path: Path = TABLE, speeds_dir: Path = SPEEDS) -> dict[str, float]:
    """Family -> the factor the planner uses (measured where measured)."""
    return {f: s.factor for f, s in family_speeds(path, speeds_dir).items()}


def band_speeds(end: str, path: Path = TABLE, speeds_dir: Path = SPEEDS) -> dict[str, float]:
    """Family -> the ``low`` or ``high`` end of its band."""
    return {f: (s.low if end == "low" else s.high) for f, s in family_speeds(path, speeds_dir).items()}


def table_info(path: Path = TABLE) -> TableInfo:
    """The table's version, date, region and sources (for result files)."""
    info, _ = _load(str(path))
    return {"version": info["version"], "retrieved": info["retrieved"], "region": info["region"],
            "pricing": info["pricing"], "sources": info["sources"],
            "family_speed": {f: s.to_json() for f, s in family_speeds(path).items()}}


def all_types(path: Path = TABLE) -> tuple[InstanceType, ...]:
    return _load(str(path))[1]


def select(patterns: Iterable[str] | None = None, path: Path = TABLE) -> list[InstanceType]:
    """The types matching any of ``patterns`` (shell-style, e.g. ``c7g.*``); the defaults if None.
    A pattern matching nothing is an error naming the known families."""
    types = all_types(path)
    wanted = list(patterns) if patterns else list(DEFAULT_TYPES)
    chosen: list[InstanceType] = []
    for pattern in wanted:
        pattern = pattern.strip()
        hits = [t for t in types if fnmatch.fnmatchcase(t.name, pattern)]
        if not hits:
            families = sorted({t.family for t in types})
            raise UserError(f"--instance-types: {pattern!r} matches no instance type; known families: "
                            f"{', '.join(families)} (sizes large..16xlarge), e.g. 'c7g.*' or 'c7i.2xlarge'")
        chosen += [t for t in hits if t not in chosen]
    return chosen


#: The instance a local node stands for: a local node of ``k`` CPUs is ``k`` of its 2 vCPUs (with that
#: share of its RAM and price). A general-purpose family: 4 GiB per vCPU, so two local workers (about
#: 0.6 GB each, measured) may share one CPU's node within tf.data's RAM budget.
LOCAL_OF = "m7i.large"
#: Local workers send to the trainer over loopback, not the instance's network: no cap at these rates.
LOOPBACK_GBPS = 40.0


def local_type(cpus: int, path: Path = TABLE) -> InstanceType:
    """A local node of ``cpus`` pinned CPUs as an instance type: that share of a ``LOCAL_OF`` node
    (vCPUs, RAM and price; the price is modelled, nothing is billed), on loopback."""
    base = by_name(LOCAL_OF, path)
    share = cpus / base.vcpus
    return InstanceType(f"local-{cpus}cpu", "local", base.arch, cpus, base.ram_gib * share,
                        base.usd_per_hour * share, LOOPBACK_GBPS)


def by_name(name: str, path: Path = TABLE) -> InstanceType:
    for t in all_types(path):
        if t.name == name:
            return t
    raise UserError(f"unknown instance type {name!r}; see {TABLE.name} for the known types")
