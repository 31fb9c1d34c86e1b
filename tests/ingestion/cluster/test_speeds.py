"""Family vCPU speeds: the table's bands, measured records replacing them, and the model using them."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from ingestion.cluster.instances import TABLE, band_speeds, by_name, family_speeds, nominal_speeds
from ingestion.cluster.model import ClusterModel, Unit, synthetic_job
from ingestion.cluster.node_speed import record


def test_every_family_has_a_speed_with_its_source_and_band() -> None:
    speeds = family_speeds()
    families = {t["family"] for t in json.loads(TABLE.read_text())["instance_types"]}
    assert set(speeds) == families
    for s in speeds.values():
        assert s.low <= s.factor <= s.high and s.source in ("reference", "assumed", "published", "measured")
    assert speeds["c7g"].source == "assumed" and (speeds["c7g"].low, speeds["c7g"].high) == (0.8, 1.2)
    assert band_speeds("low")["c7g"] == 0.8 and band_speeds("high")["c7g"] == 1.2


def _doc(instance_type: str, family: str, rate: float) -> dict:
    return {"instance_type": instance_type, "family": family, "machine": "test cpu", "date": "2026-01-01",
            "rows_per_s_per_vcpu": rate, "source": "measured"}


def test_a_measured_family_over_a_measured_reference_replaces_the_band(tmp_path: Path) -> None:
    record(_doc("c7g.xlarge", "c7g", 130.0), tmp_path)
    assert family_speeds(speeds_dir=tmp_path)["c7g"].source == "assumed"  # no reference measured yet
    record(_doc("c7i.xlarge", "c7i", 100.0), tmp_path)
    c7g = family_speeds(speeds_dir=tmp_path)["c7g"]
    assert c7g.source == "measured" and abs(c7g.factor - 1.3) < 1e-12 and c7g.low == c7g.high == c7g.factor
    assert nominal_speeds(speeds_dir=tmp_path)["c7i"] == 1.0


def test_a_faster_family_delivers_more_rows_on_the_model() -> None:
    job = synthetic_job("j", 1.0, "parse", 2)
    unit = Unit(by_name("c7g.2xlarge"))
    slow, fast = (ClusterModel([job], [unit.itype], 1, speeds={"c7g": f}) for f in (1.0, 1.5))
    config = slow.space(job, unit).initial()
    assert fast.node_rows_per_s(job, unit, config)[0] > 1.2 * slow.node_rows_per_s(job, unit, config)[0]


def test_node_speed_rejects_an_unknown_type_in_one_line() -> None:
    out = subprocess.run([sys.executable, "-m", "trainwise", "ingest", "node-speed", "--instance-type", "z9.large"],
                         capture_output=True, text=True, timeout=60)
    assert out.returncode == 2 and "unknown instance type 'z9.large'" in out.stderr
    assert "Traceback" not in out.stderr and len(out.stderr.strip().splitlines()) == 1
