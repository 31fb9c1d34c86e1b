"""REPORT-line parsing: Lambda's own formats, as its log tails carry them."""

from __future__ import annotations

import base64

import pytest

from serverless.lambda_report import decode_log_result, parse_report

# A cold start before August 2025: Init Duration not part of Billed Duration (tab separated,
# trailing tab, as the plain-text log format prints it).
COLD_2024 = (
    "START RequestId: 8f5b5c1e-2a4b-4d7e-9a53-0e3c1b2f6a11 Version: $LATEST\n"
    "END RequestId: 8f5b5c1e-2a4b-4d7e-9a53-0e3c1b2f6a11\n"
    "REPORT RequestId: 8f5b5c1e-2a4b-4d7e-9a53-0e3c1b2f6a11\tDuration: 102.25 ms\tBilled Duration: 103 ms\t"
    "Memory Size: 1769 MB\tMax Memory Used: 88 MB\tInit Duration: 245.30 ms\t\n"
)
# A cold start after the INIT-billing change: Billed Duration includes Init Duration.
COLD_2025 = (
    "REPORT RequestId: 0c2e7a55-5b1f-4a8e-b0d4-5d6f7e8a9b10\tDuration: 102.25 ms\tBilled Duration: 348 ms\t"
    "Memory Size: 1769 MB\tMax Memory Used: 88 MB\tInit Duration: 245.30 ms\t"
)
WARM = ("REPORT RequestId: 3604209a-e9a3-11e6-939a-754dd98c7be3\tDuration: 12.34 ms\tBilled Duration: 13 ms\t"
        "Memory Size: 128 MB\tMax Memory Used: 18 MB\t")
TIMEOUT = ("REPORT RequestId: 5a6b7c8d-1111-2222-3333-444455556666\tDuration: 3000.00 ms\tBilled Duration: 3000 ms\t"
           "Memory Size: 128 MB\tMax Memory Used: 39 MB\tInit Duration: 132.67 ms\tStatus: timeout")
CRASH = ("REPORT RequestId: 9e8d7c6b-aaaa-bbbb-cccc-ddddeeeeffff\tDuration: 85.10 ms\tBilled Duration: 86 ms\t"
         "Memory Size: 512 MB\tMax Memory Used: 512 MB\tStatus: error\tError Type: Runtime.OutOfMemory")
SNAPSTART = ("REPORT RequestId: 1b2c3d4e-0000-1111-2222-333344445555\tDuration: 41.72 ms\tBilled Duration: 42 ms\t"
             "Memory Size: 1024 MB\tMax Memory Used: 150 MB\tRestore Duration: 381.20 ms\t"
             "Billed Restore Duration: 182 ms\t")
JSON_FORMAT = ('{"time":"2026-11-30T12:00:00.000Z","type":"platform.report","record":{"requestId":'
               '"6f7e8d9c-0a1b-2c3d-4e5f-60718293a4b5","metrics":{"durationMs":2.35,"billedDurationMs":3,'
               '"memorySizeMB":128,"maxMemoryUsedMB":68,"initDurationMs":156.03},"status":"success"}}')
SPACED = ("REPORT RequestId: 3604209a Duration: 102.25 ms Billed Duration: 103 ms Memory Size: 1769 MB "
          "Max Memory Used: 88 MB Init Duration: 245.30 ms")


def test_cold_start_report_gives_billed_figures() -> None:
    report = parse_report(COLD_2024)
    assert report is not None
    assert report.request_id == "8f5b5c1e-2a4b-4d7e-9a53-0e3c1b2f6a11"
    assert (report.duration_ms, report.billed_ms, report.memory_mb, report.max_memory_used_mb) == (102.25, 103, 1769, 88)
    assert report.init_ms == pytest.approx(245.30) and report.cold_start
    record = report.billing_record()
    assert record.label == "billed" and record.billed_ms == 103 and record.error is None and record.cold_start


def test_billed_duration_is_taken_as_printed_whatever_the_init_billing_rule() -> None:
    assert parse_report(COLD_2025).billed_ms == 348  # not recomputed from Duration
    assert parse_report(SPACED).billed_ms == 103  # space-separated copies parse too


def test_warm_report_has_no_init() -> None:
    report = parse_report(WARM)
    assert report.init_ms == 0.0 and not report.cold_start and report.billed_ms == 13


def test_timeout_and_crash_reports_become_errors() -> None:
    timeout = parse_report(TIMEOUT)
    assert timeout.status == "timeout" and timeout.billed_ms == 3000
    assert timeout.billing_record().error == "timeout"
    crash = parse_report(CRASH)
    assert crash.status == "error" and crash.error_type == "Runtime.OutOfMemory"
    assert crash.billing_record().error == "error: Runtime.OutOfMemory"
    assert crash.billing_record("Unhandled: boom").error == "Unhandled: boom"  # the caller's text wins


def test_snapstart_restore_is_billed() -> None:
    report = parse_report(SNAPSTART)
    assert report.restore_ms == pytest.approx(381.20) and report.billed_restore_ms == 182
    assert report.billing_record().billed_ms == 42 + 182


def test_json_log_format() -> None:
    report = parse_report("some handler output\n" + JSON_FORMAT + "\n")
    assert (report.duration_ms, report.billed_ms, report.memory_mb, report.max_memory_used_mb) == (2.35, 3, 128, 68)
    assert report.init_ms == pytest.approx(156.03) and report.status == "success"


def test_log_result_round_trip_and_absent_reports() -> None:
    encoded = base64.b64encode(("[INFO] rollout done\n" + WARM + "\n").encode()).decode()
    assert parse_report(decode_log_result(encoded)).billed_ms == 13
    assert decode_log_result(None) == "" and decode_log_result("") == ""
    assert parse_report("") is None
    assert parse_report("START RequestId: x Version: $LATEST\nEND RequestId: x\n") is None
    # A truncated REPORT (missing fields) is not half-parsed into a wrong bill.
    assert parse_report("REPORT RequestId: x\tDuration: 1.00 ms\tBilled Duration: 2 ms") is None
    assert parse_report('{"type":"platform.report","record":{"metrics":{}}}') is None
