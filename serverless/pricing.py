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

from core.errors import UserError, field_name
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
        """Read and check a price table; a missing, mistyped or negative field is a UserError
        naming it (``lambda.gb_second_usd.arm64``)."""
        path = Path(path) if path is not None else DEFAULT_TABLE
        try:
            raw: Any = json.loads(path.read_text(encoding="utf-8"))
        except (FileNotFoundError, IsADirectoryError):
            raise UserError(f"price table {path} does not exist or is not a file") from None
        except (json.JSONDecodeError, UnicodeDecodeError) as exc:
            raise UserError(f"price table {path} is not valid JSON: {exc}") from None
        field = _Fields(raw, str(path))
        rates = field.mapping("lambda.gb_second_usd")
        if not rates:
            raise UserError(f"price table {path}: lambda.gb_second_usd prices no architecture; allowed: {list(ARCHITECTURES)}")
        granularity = field.number("lambda.billing_granularity_ms", default=1)
        if granularity < 1 or granularity != int(granularity):
            raise UserError(f"price table {path}: lambda.billing_granularity_ms must be a whole number >= 1, got {granularity}")
        return cls(
            version=field.text("version"),
            gb_second_usd={arch: field.checked(f"lambda.gb_second_usd.{field_name(arch)}", v) for arch, v in rates.items()},
            request_usd=field.number("lambda.request_usd_per_million") / 1e6,
            granularity_ms=int(granularity),
            vm_usd_per_hour=field.number("learner_vm.usd_per_hour"),
            vm_instance_type=field.text("learner_vm.instance_type"),
            sources={"lambda": field.text("lambda.source"), "learner_vm": field.text("learner_vm.source")},
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


class _Fields:
    """Typed look-ups of dotted fields in a parsed price table, each failing as a UserError."""

    def __init__(self, raw: Any, source: str) -> None:
        self.raw, self.source = raw, source

    def _get(self, dotted: str, default: Any = None) -> Any:
        node = self.raw
        for part in dotted.split("."):
            if not isinstance(node, dict):
                raise UserError(f"price table {self.source}: {dotted} is missing (its parent is not an object)")
            if part not in node:
                if default is not None:
                    return default
                raise UserError(f"price table {self.source}: field {dotted} is missing")
            node = node[part]
        return node

    def number(self, dotted: str, default: float | None = None) -> float:
        return self.checked(dotted, self._get(dotted, default))

    def checked(self, dotted: str, value: Any) -> float:
        if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value) or value < 0:
            raise UserError(f"price table {self.source}: {dotted} must be a finite number >= 0, got {value!r}")
        return float(value)

    def text(self, dotted: str) -> str:
        value = self._get(dotted)
        if not isinstance(value, (str, int)) or isinstance(value, bool) or str(value) == "":
            raise UserError(f"price table {self.source}: {dotted} must be a non-empty string, got {value!r}")
        return str(value)

    def mapping(self, dotted: str) -> dict[str, Any]:
        value = self._get(dotted)
        if not isinstance(value, dict):
            raise UserError(f"price table {self.source}: {dotted} must be an object, got {value!r}")
        return value
