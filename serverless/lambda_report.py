"""Parse Lambda's per-invocation REPORT record into billed figures.

A synchronous ``Invoke`` with ``LogType=Tail`` returns the last 4 KB of the
invocation's log, base64-encoded, in ``LogResult``. Lambda closes every
invocation's log with a REPORT record, which is the only place the *billed*
duration of that one call appears. Two formats exist:

* the plain-text format (the default), tab- or space-separated::

    REPORT RequestId: 8f5b…  Duration: 102.25 ms  Billed Duration: 103 ms
    Memory Size: 1769 MB  Max Memory Used: 88 MB  Init Duration: 245.30 ms

  optionally followed by ``Restore Duration``/``Billed Restore Duration``
  (SnapStart), ``Status: timeout|error`` and ``Error Type: …``;

* the JSON format (``LoggingConfig.LogFormat = JSON``), one ``platform.report``
  object with ``record.metrics.{durationMs, billedDurationMs, memorySizeMB,
  maxMemoryUsedMB, initDurationMs}`` and ``record.status``.

Since 1 August 2025 AWS bills the INIT phase of on-demand ZIP functions on
managed runtimes too, so ``Billed Duration`` may include ``Init Duration``. We
never recompute the bill: the ledger takes ``Billed Duration`` exactly as AWS
printed it, whichever billing rule was in force when the call ran.
"""

from __future__ import annotations

import base64
import binascii
import json
import math
import re
from dataclasses import dataclass

from serverless.invocation import BillingRecord

_FIELD = re.compile(
    r"(?P<name>RequestId|Duration|Billed Duration|Memory Size|Max Memory Used|Init Duration"
    r"|Restore Duration|Billed Restore Duration|Status|Error Type):\s*(?P<value>[^\t\n]*?)"
    r"(?=\s+(?:RequestId|Duration|Billed Duration|Memory Size|Max Memory Used|Init Duration"
    r"|Restore Duration|Billed Restore Duration|Status|Error Type):|\s*$)"
)
_NUMBER = re.compile(r"^\s*([0-9]+(?:\.[0-9]+)?)\s*(?:ms|MB)?\s*$")


@dataclass(frozen=True)
class LambdaReport:
    """The figures of one REPORT record, in Lambda's own units (ms, MB)."""

    request_id: str
    duration_ms: float
    billed_ms: int
    memory_mb: int
    max_memory_used_mb: int
    init_ms: float = 0.0
    restore_ms: float = 0.0
    billed_restore_ms: int = 0
    status: str = "success"
    error_type: str | None = None

    @property
    def cold_start(self) -> bool:
        """A REPORT carries ``Init Duration`` only for the call that created its environment."""
        return self.init_ms > 0.0

    def billing_record(self, error: str | None = None) -> BillingRecord:
        """This report as a ledger entry, labelled ``billed``.

        SnapStart's ``Billed Restore Duration`` is added to the billed time, since
        AWS charges it at the same GB-second rate.
        """
        if error is None and self.status != "success":
            error = f"{self.status}: {self.error_type}" if self.error_type else self.status
        return BillingRecord(
            billed_ms=self.billed_ms + self.billed_restore_ms,
            duration_ms=self.duration_ms,
            init_ms=self.init_ms,
            memory_mb=self.memory_mb,
            error=error,
            cold_start=self.cold_start,
            max_memory_used_mb=self.max_memory_used_mb,
            label="billed",
        )


def decode_log_result(log_result_b64: str | None) -> str:
    """Decode ``LogResult`` (base64 of the log tail); empty text when absent or garbled."""
    if not log_result_b64:
        return ""
    try:
        return base64.b64decode(log_result_b64, validate=False).decode("utf-8", errors="replace")
    except (binascii.Error, ValueError):
        return ""


def parse_report(log_text: str) -> LambdaReport | None:
    """Find the last REPORT record in a log tail, in either format; None if there is none.

    The last one wins because a tail can hold the end of an earlier invocation's
    log (never its REPORT in practice, but the rule costs nothing).
    """
    found: LambdaReport | None = None
    for line in log_text.splitlines():
        stripped = line.strip()
        if stripped.startswith("REPORT "):
            report = _parse_text_line(stripped)
        elif '"platform.report"' in stripped:
            report = _parse_json_line(stripped)
        else:
            continue
        if report is not None:
            found = report
    return found


def _number(text: str) -> float:
    match = _NUMBER.match(text)
    if match is None:
        raise ValueError(f"not a number with a unit: {text!r}")
    return float(match.group(1))


def _parse_text_line(line: str) -> LambdaReport | None:
    fields = {m.group("name"): m.group("value").strip() for m in _FIELD.finditer(line[len("REPORT ") :])}
    required = ("Duration", "Billed Duration", "Memory Size", "Max Memory Used")
    if any(name not in fields for name in required):
        return None
    try:
        return LambdaReport(
            request_id=fields.get("RequestId", ""),
            duration_ms=_number(fields["Duration"]),
            billed_ms=int(math.ceil(_number(fields["Billed Duration"]))),
            memory_mb=int(_number(fields["Memory Size"])),
            max_memory_used_mb=int(_number(fields["Max Memory Used"])),
            init_ms=_number(fields["Init Duration"]) if "Init Duration" in fields else 0.0,
            restore_ms=_number(fields["Restore Duration"]) if "Restore Duration" in fields else 0.0,
            billed_restore_ms=(
                int(math.ceil(_number(fields["Billed Restore Duration"])))
                if "Billed Restore Duration" in fields
                else 0
            ),
            status=fields.get("Status", "success") or "success",
            error_type=fields.get("Error Type") or None,
        )
    except ValueError:
        return None


def _parse_json_line(line: str) -> LambdaReport | None:
    try:
        obj = json.loads(line)
        if obj.get("type") != "platform.report":
            return None
        record = obj["record"]
        metrics = record["metrics"]
        return LambdaReport(
            request_id=str(record.get("requestId", "")),
            duration_ms=float(metrics["durationMs"]),
            billed_ms=int(math.ceil(float(metrics["billedDurationMs"]))),
            memory_mb=int(metrics["memorySizeMB"]),
            max_memory_used_mb=int(metrics["maxMemoryUsedMB"]),
            init_ms=float(metrics.get("initDurationMs", 0.0)),
            restore_ms=float(metrics.get("restoreDurationMs", 0.0)),
            billed_restore_ms=int(math.ceil(float(metrics.get("billedRestoreDurationMs", 0)))),
            status=str(record.get("status", "success")),
            error_type=record.get("errorType"),
        )
    except (ValueError, KeyError, TypeError, AttributeError):
        return None
