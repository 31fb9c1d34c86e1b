"""The price table: Lambda (x86 and Arm, per GB-s and per request) and the learner VM.

Prices live in one versioned JSON file (``serverless/data/prices.json``) with the
pages they came from and the date; every cost figure carries that version. Lambda
bills the duration rounded up to 1 ms, times the configured memory in GB
(memory_mb / 1024), times the per-GB-s price of the architecture.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from core.errors import UserError
from serverless.architectures import ARCHITECTURES

__all__ = ["ARCHITECTURES", "DEFAULT_TABLE", "PriceTable", "billed_ms"]
DEFAULT_TABLE = Path(__file__).parent / "data" / "prices.json"


def billed_ms(duration_ms: float, granularity_ms: int = 1) -> int:
    """Lambda's billed duration: rounded up to the granularity (1 ms), at least one unit."""
    if duration_ms < 0:
        raise ValueError(f"duration must be >= 0 ms, got {duration_ms}")
    units = max(1, math.ceil(round(duration_ms, 6) / granularity_ms))
    return int(units * granularity_ms)


@dataclass(frozen=True)
class PriceTable:
    version: str
    gb_second_usd: dict[str, float]
    request_usd: float
    granularity_ms: int
    vm_usd_per_hour: float
    vm_instance_type: str
    sources: dict[str, str]

    @classmethod
    def load(cls, path: str | Path | None = None) -> "PriceTable":
        path = Path(path) if path is not None else DEFAULT_TABLE
        try:
            raw: dict[str, Any] = json.loads(path.read_text())
        except FileNotFoundError:
            raise UserError(f"price table {path} does not exist") from None
        except json.JSONDecodeError as exc:
            raise UserError(f"price table {path} is not valid JSON: {exc}") from None
        lam, vm = raw["lambda"], raw["learner_vm"]
        return cls(
            version=str(raw["version"]),
            gb_second_usd={k: float(v) for k, v in lam["gb_second_usd"].items()},
            request_usd=float(lam["request_usd_per_million"]) / 1e6,
            granularity_ms=int(lam.get("billing_granularity_ms", 1)),
            vm_usd_per_hour=float(vm["usd_per_hour"]),
            vm_instance_type=str(vm["instance_type"]),
            sources={"lambda": lam["source"], "learner_vm": vm["source"]},
        )

    def gb_second_price(self, architecture: str) -> float:
        key = ARCHITECTURES.get(architecture).price_key
        if key not in self.gb_second_usd:
            raise UserError(f"architecture {architecture!r} is not priced in table {self.version}; "
                            f"priced: {sorted(self.gb_second_usd)}")
        return self.gb_second_usd[key]

    @staticmethod
    def gb_seconds(billed_ms_: float, memory_mb: int) -> float:
        return billed_ms_ / 1000.0 * memory_mb / 1024.0

    def lambda_cost(self, billed_ms_: float, memory_mb: int, architecture: str = "x86_64") -> float:
        """Duration cost of ``billed_ms_`` at ``memory_mb`` (requests not included)."""
        return self.gb_seconds(billed_ms_, memory_mb) * self.gb_second_price(architecture)

    def request_cost(self, requests: int) -> float:
        return requests * self.request_usd

    def vm_cost(self, seconds: float) -> float:
        return seconds / 3600.0 * self.vm_usd_per_hour

    def describe(self) -> dict[str, Any]:
        return {"version": self.version, "sources": self.sources, "learner_vm": self.vm_instance_type}
