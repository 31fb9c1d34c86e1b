"""The cost ledger: what a run cost, by component, with the prices that produced it.

Components: ``function_gb_s`` (Lambda duration), ``requests`` (per invocation) and
``learner_vm`` (the machine that runs the learner, for the whole run). ``label`` says
whether the figures are "modelled from price table" (the local emulator and Ray) or
"billed" (durations from AWS's own REPORT lines, priced with the same table).

``faults`` is the part of those lines that paid for invocations whose result was not
used: failed and timed-out attempts that were retried, hedge losers, and results refused
as stale. Throttled calls are counted there with no cost (Lambda charges nothing for a
429). The fault lines are already inside ``function_gb_s`` and ``requests``, so the
total is the sum of the three lines above, not of the faults besides.

``time_by_phase`` is where the run's measured wall time went, summed over its iterations
by phase (:class:`serverless.iteration_clock.PhaseBreakdown`: weight encoding, dispatch,
the functions' env stepping, policy inference and other handler time on the critical
path, decoding, GAE, the update, checkpoints, the rest), with each phase's share.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal, TypedDict

from serverless.pricing import PriceTable, PriceTableInfo

LedgerLabel = Literal["modelled from price table", "billed"]
MODELLED: LedgerLabel = "modelled from price table"
BILLED: LedgerLabel = "billed"


class TimeByPhase(TypedDict):
    seconds: dict[str, float]
    shares: dict[str, float]
    label: str  # measured


class LedgerLine(TypedDict):
    """One component of the cost: its quantity in its unit, the unit price and the dollars."""

    component: str
    quantity: float
    unit: str
    unit_price_usd: float
    usd: float


class FaultsCost(TypedDict):
    label: LedgerLabel
    by_kind: dict[str, dict[str, float]]  # {"invocations", "gb_seconds", "usd"} per fault kind
    usd: float
    share_of_total: float
    note: str


class LedgerJson(TypedDict):
    """A ledger as a run's result carries it."""

    label: LedgerLabel
    architecture: str
    price_table: PriceTableInfo
    lines: list[LedgerLine]
    total_usd: float
    faults: FaultsCost
    time_by_phase: TimeByPhase


class LedgerTotals(TypedDict):
    """The running totals a checkpoint keeps (:meth:`CostLedger.totals`, :meth:`CostLedger.restore`)."""

    gb_seconds: float
    function_usd: float
    requests: int
    learner_seconds: float
    fault_costs: dict[str, dict[str, float]]
    phase_seconds: dict[str, float]


@dataclass
class CostLedger:
    prices: PriceTable
    architecture: str = "x86_64"
    label: LedgerLabel = MODELLED
    gb_seconds: float = 0.0
    function_usd: float = 0.0
    requests: int = 0
    learner_seconds: float = 0.0
    # by fault kind: {"invocations", "gb_seconds", "usd"} of attempts whose result was not used
    fault_costs: dict[str, dict[str, float]] = field(default_factory=dict)
    phase_seconds: dict[str, float] = field(default_factory=dict)  # measured wall s by iteration phase

    def add_invocation(self, billed_ms: int, memory_mb: int) -> None:
        """One invocation: its duration (GB-s) and its request."""
        self.gb_seconds += self.prices.gb_seconds(billed_ms, memory_mb)
        self.function_usd += self.prices.lambda_cost(billed_ms, memory_mb, self.architecture)
        self.requests += 1

    def add_fault(self, kind: str, billed_ms: int, memory_mb: int, *, billed: bool = True) -> None:
        """An attempt whose result was not used, by kind; billed ones are also added as invocations.

        ``billed=False`` (a throttled call) counts the attempt at no cost."""
        line = self.fault_costs.setdefault(kind, {"invocations": 0, "gb_seconds": 0.0, "usd": 0.0})
        line["invocations"] += 1
        if billed:
            self.add_invocation(billed_ms, memory_mb)
            line["gb_seconds"] += self.prices.gb_seconds(billed_ms, memory_mb)
            line["usd"] += self.prices.lambda_cost(billed_ms, memory_mb, self.architecture) + self.prices.request_cost(1)

    @property
    def fault_usd(self) -> float:
        return sum(line["usd"] for line in self.fault_costs.values())

    def add_learner_time(self, seconds: float) -> None:
        self.learner_seconds += seconds

    def add_phase_times(self, seconds: dict[str, float]) -> None:
        """Add an iteration's (or a checkpoint's) measured wall seconds by phase."""
        for name, value in seconds.items():
            self.phase_seconds[name] = self.phase_seconds.get(name, 0.0) + float(value)

    def time_by_phase(self) -> TimeByPhase:
        total = sum(self.phase_seconds.values())
        return {
            "seconds": dict(self.phase_seconds),
            "shares": {k: (v / total if total > 0 else 0.0) for k, v in self.phase_seconds.items()},
            "label": "measured",
        }

    @property
    def request_usd(self) -> float:
        return self.prices.request_cost(self.requests)

    @property
    def learner_usd(self) -> float:
        return self.prices.vm_cost(self.learner_seconds)

    @property
    def total_usd(self) -> float:
        return self.function_usd + self.request_usd + self.learner_usd

    def totals(self) -> LedgerTotals:
        """The running totals (for a checkpoint); :meth:`restore` puts them back."""
        return {
            "gb_seconds": self.gb_seconds,
            "function_usd": self.function_usd,
            "requests": self.requests,
            "learner_seconds": self.learner_seconds,
            "fault_costs": {k: dict(v) for k, v in self.fault_costs.items()},
            "phase_seconds": dict(self.phase_seconds),
        }

    def restore(self, totals: LedgerTotals) -> None:
        self.gb_seconds = float(totals["gb_seconds"])
        self.function_usd = float(totals["function_usd"])
        self.requests = int(totals["requests"])
        self.learner_seconds = float(totals["learner_seconds"])
        self.fault_costs = {str(k): {n: float(x) for n, x in v.items()} for k, v in totals.get("fault_costs", {}).items()}
        self.phase_seconds = {str(k): float(v) for k, v in totals.get("phase_seconds", {}).items()}

    def lines(self) -> list[LedgerLine]:
        p = self.prices
        return [
            {
                "component": "function_gb_s",
                "quantity": self.gb_seconds,
                "unit": "GB-s",
                "unit_price_usd": p.gb_second_price(self.architecture),
                "usd": self.function_usd,
            },
            {
                "component": "requests",
                "quantity": self.requests,
                "unit": "request",
                "unit_price_usd": p.request_usd,
                "usd": self.request_usd,
            },
            {
                "component": "learner_vm",
                "quantity": self.learner_seconds / 3600.0,
                "unit": f"hour ({p.vm_instance_type})",
                "unit_price_usd": p.vm_usd_per_hour,
                "usd": self.learner_usd,
            },
        ]

    def faults(self) -> FaultsCost:
        """The cost of faults: attempts paid for (or refused) whose result was not used."""
        return {
            "label": self.label,
            "by_kind": {k: dict(v) for k, v in sorted(self.fault_costs.items())},
            "usd": self.fault_usd,
            "share_of_total": self.fault_usd / self.total_usd if self.total_usd > 0 else 0.0,
            "note": "included in function_gb_s and requests; throttled calls are not billed",
        }

    def to_dict(self) -> LedgerJson:
        return {
            "label": self.label,
            "architecture": self.architecture,
            "price_table": self.prices.describe(),
            "lines": self.lines(),
            "total_usd": self.total_usd,
            "faults": self.faults(),
            "time_by_phase": self.time_by_phase(),
        }
