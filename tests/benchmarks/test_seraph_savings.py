"""The series' saving by source: pairs of runs read from a work dir, parts that add up."""

import json
from pathlib import Path

import pytest

from benchmarks.seraph_savings import main, pairs, summary


def _write(folder: Path, name: str, steps: int, fn: float, learner: float, cost: float, tuned: bool) -> None:
    lines = [{"component": "function_gb_s", "usd": fn}, {"component": "learner_vm", "usd": learner}]
    body = ({"achieved": {"env_steps": steps, "cost_usd": cost}, "training": {"ledger": {"lines": lines}}} if tuned
            else {"env_steps": steps, "cost_usd": cost, "ledger": {"lines": lines}})
    (folder / name).write_text(json.dumps(body))


def test_the_parts_add_up_to_the_series_bill_ratio(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    folder = tmp_path / "json"
    folder.mkdir()
    _write(folder, "Acrobot-v1-static-seed0.json", 1000, 0.01, 0.01, 0.02, tuned=False)
    _write(folder, "Acrobot-v1-tune-cost-seed0.json", 500, 0.006, 0.002, 0.009, tuned=True)
    _write(folder, "Acrobot-v1-tune-cost-seed1.json", 500, 0.006, 0.002, 0.009, tuned=True)  # no static: left out
    got = pairs(folder, "cost")
    assert list(got) == ["Acrobot-v1"] and len(got["Acrobot-v1"]) == 1
    s = summary(got["Acrobot-v1"])
    parts = sum(s[f"{p}_share"] for p in ("env_steps_usd", "functions_usd", "learner_usd", "tuning_usd"))
    assert s["bill_ratio"] == pytest.approx(0.45) and parts == pytest.approx(0.45 - 1)
    assert main(["--work-dir", str(tmp_path)]) == 0 and "Acrobot-v1" in capsys.readouterr().out


def test_a_folder_without_runs_is_a_usage_error(tmp_path: Path) -> None:
    with pytest.raises(SystemExit):
        main(["--work-dir", str(tmp_path)])
