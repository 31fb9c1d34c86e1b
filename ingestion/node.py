"""A node that runs an ingestion pipeline: its vCPUs, RAM and hourly price.

Always a parameter, never a constant of this machine, so the same optimizers and
simulator evaluate 8-, 32-, 64- and 96-vCPU nodes (and InTuneX's cluster-level agent
can pick instance types by throughput per dollar).
"""

from __future__ import annotations

import os
from dataclasses import asdict, dataclass
from typing import TypedDict

from core.errors import UserError


@dataclass(frozen=True)
class Node:
    name: str
    vcpus: int
    ram_gib: float
    hourly_usd: float = 0.0
    ram_budget_share: float = 0.5  # tf.data AUTOTUNE's default RAM budget share

    def __post_init__(self) -> None:
        if self.vcpus < 1:
            raise UserError(f"node {self.name!r}: vcpus must be >= 1, got {self.vcpus}")
        if self.ram_gib <= 0:
            raise UserError(f"node {self.name!r}: ram_gib must be > 0, got {self.ram_gib}")
        if not 0 < self.ram_budget_share <= 1:
            raise UserError(f"node {self.name!r}: ram_budget_share must be in (0, 1], got {self.ram_budget_share}")

    @property
    def ram_budget_mb(self) -> float:
        return self.ram_gib * 1024 * self.ram_budget_share


def this_machine(hourly_usd: float = 0.0) -> Node:
    """The machine we run on, as a Node."""
    import psutil

    return Node(
        name="local",
        vcpus=len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1),
        ram_gib=psutil.virtual_memory().total / 2**30,
        hourly_usd=hourly_usd,
    )


class NodeFields(TypedDict):
    """A node's fields as JSON: what a measurement worker rebuilds the node from."""

    name: str
    vcpus: int
    ram_gib: float
    hourly_usd: float
    ram_budget_share: float


def node_fields(node: Node) -> NodeFields:
    return NodeFields(**asdict(node))  # the dataclass's fields are the TypedDict's


def node_of(node: Node | NodeFields | None) -> Node:
    """A node from a :class:`Node`, its fields (what a worker process gets) or None (this machine)."""
    if isinstance(node, Node):
        return node
    return Node(**node) if node else this_machine()
