"""Billing arithmetic and the cost ledger, against hand-computed figures."""

from __future__ import annotations

import datetime
import json

import pytest

from serverless.ledger import CostLedger
from serverless.pricing import DEFAULT_TABLE, PriceTable, billed_ms
from core.errors import UserError


def test_billed_duration_rounds_up_to_1_ms() -> None:
    assert billed_ms(10.0) == 10
    assert billed_ms(10.0001) == 11
    assert billed_ms(0.2) == 1  # at least one unit
    assert billed_ms(99.5) == 100
    with pytest.raises(ValueError):
        billed_ms(-1.0)


def test_price_table_has_versioned_sources() -> None:
    table = PriceTable.load()
    assert table.version and table.sources["lambda"].startswith("https://aws.amazon.com/lambda/pricing")
    assert table.gb_second_usd["x86_64"] == pytest.approx(0.0000166667)
    assert table.gb_second_usd["arm64"] == pytest.approx(0.0000133334)
    assert table.request_usd == pytest.approx(0.20 / 1e6)


def test_lambda_cost_by_hand() -> None:
    table = PriceTable.load()
    # 1 s at 1024 MB = 1 GB-s
    assert table.lambda_cost(1000, 1024, "x86_64") == pytest.approx(0.0000166667)
    # 250 ms at 1769 MB on Arm: 0.25 * 1769/1024 GB-s * 0.0000133334
    assert table.lambda_cost(250, 1769, "arm64") == pytest.approx(0.25 * 1769 / 1024 * 0.0000133334)
    assert table.vm_cost(1800) == pytest.approx(table.vm_usd_per_hour / 2)
    with pytest.raises(UserError, match="allowed"):
        table.lambda_cost(1, 128, "sparc")


def test_ledger_lines_and_total_by_hand(tmp_path) -> None:
    prices = {"default_region": "test-1", "regions": {"test-1": {
        "retrieved": "2026-11-30",
        "lambda": {"source": "s", "request_usd_per_million": 0.2, "gb_second_usd": {"x86_64": 0.00001, "arm64": 0.000008}},
        "learner_vm": {"source": "v", "instance_type": "vm", "usd_per_hour": 0.36},
    }}}
    path = tmp_path / "prices.json"
    path.write_text(json.dumps(prices))
    ledger = CostLedger(PriceTable.load(path), architecture="x86_64")
    ledger.add_invocation(billed_ms=2000, memory_mb=512)  # 1 GB-s
    ledger.add_invocation(billed_ms=500, memory_mb=2048)  # 1 GB-s
    ledger.add_learner_time(100.0)  # 100 s at $0.36/h = $0.01
    d = ledger.to_dict()
    lines = {line["component"]: line for line in d["lines"]}
    assert lines["function_gb_s"]["quantity"] == pytest.approx(2.0)
    assert lines["function_gb_s"]["usd"] == pytest.approx(0.00002)
    assert lines["requests"]["quantity"] == 2 and lines["requests"]["usd"] == pytest.approx(0.0000004)
    assert lines["learner_vm"]["usd"] == pytest.approx(0.01)
    assert d["total_usd"] == pytest.approx(0.00002 + 0.0000004 + 0.01)
    assert d["label"] == "modelled from price table" and d["price_table"]["version"] == "test-1 2026-11-30"


def test_bad_price_table_is_a_user_error(tmp_path) -> None:
    with pytest.raises(UserError, match="does not exist"):
        PriceTable.load(tmp_path / "none.json")
    bad = tmp_path / "bad.json"
    bad.write_text("{")
    with pytest.raises(UserError, match="not valid JSON"):
        PriceTable.load(bad)


def _two_region_file(tmp_path, retrieved: str = "2026-11-30"):
    table = json.loads(DEFAULT_TABLE.read_text())
    eu = json.loads(json.dumps(table["regions"]["us-east-1"]))
    eu["retrieved"] = retrieved
    eu["lambda"]["gb_second_usd"]["x86_64"] = 0.00002
    table["regions"]["eu-west-1"] = eu
    path = tmp_path / "prices.json"
    path.write_text(json.dumps(table))
    return path


def test_each_region_has_its_table_source_and_date(tmp_path) -> None:
    path = _two_region_file(tmp_path)
    today = datetime.date(2026, 12, 5)
    eu = PriceTable.load(path, region="eu-west-1", today=today)
    assert eu.region == "eu-west-1" and eu.gb_second_price("x86_64") == 0.00002 and eu.warnings == ()
    assert eu.version == "eu-west-1 2026-11-30" and eu.sources["lambda"].startswith("https://")
    default = PriceTable.load(path, today=today)
    assert default.region == "us-east-1" and default.gb_second_price("x86_64") == 0.0000166667
    assert default.describe()["retrieved"] == "2026-11-30"


def test_a_missing_region_or_a_stale_table_is_a_warning(tmp_path) -> None:
    path = _two_region_file(tmp_path, retrieved="2026-01-15")
    missing = PriceTable.load(path, region="ap-south-2", today=datetime.date(2026, 12, 5))
    assert missing.region == "us-east-1" and len(missing.warnings) == 1
    assert "no price table for region 'ap-south-2'" in missing.warnings[0]
    stale = PriceTable.load(path, region="eu-west-1", today=datetime.date(2026, 12, 5))
    assert len(stale.warnings) == 1 and "324 days ago (more than 90)" in stale.warnings[0]
    fresh = PriceTable.load(path, region="eu-west-1", today=datetime.date(2026, 4, 15))  # 90 days: not yet stale
    assert fresh.warnings == ()
    assert CostLedger(stale).to_dict()["price_table"]["warnings"] == list(stale.warnings)  # the report carries it


def test_the_lambda_configs_region_selects_the_table(tmp_path) -> None:
    from serverless.pricing import price_region

    config = tmp_path / "aws.json"
    config.write_text(json.dumps({"function_name": "trainwise-rollout", "region": "eu-west-1"}))
    assert price_region("lambda", {"lambda_config": str(config)}) == "eu-west-1"
    assert price_region("local", {}) is None and price_region("ray", {}) is None
    table = PriceTable.for_run("lambda", {"lambda_config": str(config)}, _two_region_file(tmp_path))
    assert table.region == "eu-west-1"


def test_the_plan_carries_the_price_warnings(tmp_path) -> None:
    from optimizers.seraph.job import prices_for

    config = tmp_path / "aws.json"
    config.write_text(json.dumps({"function_name": "trainwise-rollout", "region": "sa-east-1"}))
    prices = prices_for("x86_64", None, "lambda", {"lambda_config": str(config)})
    assert prices.as_dict()["warnings"] and "sa-east-1" in prices.warnings[0]
    assert "us-east-1" in prices.source
