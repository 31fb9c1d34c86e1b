"""The price table: Lambda (x86 and Arm, per GB-s and per request) and the learner VM, per region.

Prices live in one JSON file (``serverless/data/prices.json``) holding a table per AWS region,
each with the pages it came from and the date it was read (``retrieved``); every cost figure
carries the table's version, ``<region> <retrieved>``. The Lambda config's region selects the
table (:meth:`PriceTable.for_run`); the local emulator and Ray price as ``default_region``.
A region the file has no table for is priced with the default region's table, and a table
read more than ``max_age_days`` (90) ago is still used: both are :attr:`PriceTable.warnings`,
which the plan and the cost ledger (the report) carry. Lambda bills the duration rounded up to
1 ms, times the configured memory in GB (memory_mb / 1024), times the per-GB-s price of the
architecture.
"""

from __future__ import annotations

import datetime as dt
import json
import math
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypedDict

from core.errors import UserError, field_name
from core.json_edge import JsonObject
from serverless.architectures import ARCHITECTURES

__all__ = ["ARCHITECTURES", "DEFAULT_TABLE", "PriceTable", "billed_ms"]
DEFAULT_TABLE = Path(__file__).parent / "data" / "prices.json"


def billed_ms(duration_ms: float, granularity_ms: int = 1) -> int:
    """Lambda's billed duration: rounded up to the granularity (1 ms), at least one unit."""
    if duration_ms < 0:
        raise ValueError(f"duration must be >= 0 ms, got {duration_ms}")
    units = max(1, math.ceil(round(duration_ms, 6) / granularity_ms))
    return int(units * granularity_ms)


def price_region(backend: str, backend_options: Mapping[str, str | int | float | bool] | None = None) -> str | None:
    """The region a run is priced in: the Lambda config's for the lambda backend (its
    ``lambda_config`` option, or the default config file), None (the default table) otherwise
    or when the config cannot be read (the backend itself reports that)."""
    if backend != "lambda":
        return None
    from serverless.lambda_config import DEFAULT_CONFIG_PATH, LambdaConfig

    try:
        return LambdaConfig.from_file((backend_options or {}).get("lambda_config") or DEFAULT_CONFIG_PATH).region
    except UserError:
        return None


class PriceTableInfo(TypedDict):
    """Which prices a run's figures used (a ledger's ``price_table``)."""

    version: str
    region: str
    retrieved: str
    sources: dict[str, str]
    learner_vm: str  # the learner's instance type
    warnings: list[str]


@dataclass(frozen=True)
class PriceTable:
    version: str
    gb_second_usd: dict[str, float]
    request_usd: float
    granularity_ms: int
    vm_usd_per_hour: float
    vm_instance_type: str
    sources: dict[str, str]
    region: str = "us-east-1"
    retrieved: str = ""
    warnings: tuple[str, ...] = ()

    @classmethod
    def for_run(cls, backend: str, backend_options: Mapping[str, str | int | float | bool] | None = None,
                path: str | Path | None = None) -> "PriceTable":
        """The table of the region the run's backend bills in (:func:`price_region`)."""
        return cls.load(path, region=price_region(backend, backend_options))

    @classmethod
    def load(cls, path: str | Path | None = None, region: str | None = None,
             today: dt.date | None = None) -> "PriceTable":
        """Read and check the table of ``region`` (default: the file's ``default_region``); a
        missing, mistyped or negative field is a UserError naming it
        (``regions.us-east-1.lambda.gb_second_usd.arm64``). A missing region or a stale table
        is a warning (``today`` is the date the age is judged on; default: today)."""
        path = Path(path) if path is not None else DEFAULT_TABLE
        try:
            raw: Any = json.loads(path.read_text(encoding="utf-8"))
        except (FileNotFoundError, IsADirectoryError):
            raise UserError(f"price table {path} does not exist or is not a file") from None
        except (json.JSONDecodeError, UnicodeDecodeError) as exc:
            raise UserError(f"price table {path} is not valid JSON: {exc}") from None
        top = _Fields(raw, str(path))
        default = top.text("default_region")
        tables = top.mapping("regions")
        chosen = region if region in tables else default
        if chosen not in tables:
            raise UserError(f"price table {path}: default_region {default!r} has no table; regions: {sorted(tables)}")
        notes = [] if region in (None, chosen) else [
            f"no price table for region {region!r} in {path.name}; priced with {chosen}'s (regions: {sorted(tables)})"]
        field = _Fields(tables[chosen], f"{path} (regions.{chosen})")
        retrieved = field.date("retrieved")
        age = ((today or dt.date.today()) - retrieved).days
        max_age = int(top.number("max_age_days", default=90))
        if age > max_age:
            notes.append(f"the {chosen} price table was read on {retrieved.isoformat()}, {age} days ago (more than "
                         f"{max_age}): prices may have changed; update {path.name} from its sources")
        return cls._of(field, chosen, retrieved.isoformat(), tuple(notes))

    @classmethod
    def _of(cls, field: "_Fields", region: str, retrieved: str, notes: tuple[str, ...]) -> "PriceTable":
        rates = field.mapping("lambda.gb_second_usd")
        if not rates:
            raise UserError(f"price table {field.source}: lambda.gb_second_usd prices no architecture; "
                            f"allowed: {list(ARCHITECTURES)}")
        granularity = field.number("lambda.billing_granularity_ms", default=1)
        if granularity < 1 or granularity != int(granularity):
            raise UserError(f"price table {field.source}: lambda.billing_granularity_ms must be a whole number >= 1, "
                            f"got {granularity}")
        return cls(
            version=f"{region} {retrieved}",
            gb_second_usd={arch: field.checked(f"lambda.gb_second_usd.{field_name(arch)}", v) for arch, v in rates.items()},
            request_usd=field.number("lambda.request_usd_per_million") / 1e6,
            granularity_ms=int(granularity),
            vm_usd_per_hour=field.number("learner_vm.usd_per_hour"),
            vm_instance_type=field.text("learner_vm.instance_type"),
            sources={"lambda": field.text("lambda.source"), "learner_vm": field.text("learner_vm.source")},
            region=region,
            retrieved=retrieved,
            warnings=notes,
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

    def describe(self) -> PriceTableInfo:
        return {"version": self.version, "region": self.region, "retrieved": self.retrieved, "sources": self.sources,
                "learner_vm": self.vm_instance_type, "warnings": list(self.warnings)}


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

    def date(self, dotted: str) -> dt.date:
        text = self.text(dotted)
        try:
            return dt.date.fromisoformat(text)
        except ValueError:
            raise UserError(f"price table {self.source}: {dotted} must be a date such as 2026-11-30, got {text!r}") from None

    def mapping(self, dotted: str) -> JsonObject:
        value = self._get(dotted)
        if not isinstance(value, dict):
            raise UserError(f"price table {self.source}: {dotted} must be an object, got {value!r}")
        return value
