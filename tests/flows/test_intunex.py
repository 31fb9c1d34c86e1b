"""The intunex flow on a one-job jobs file: it completes, writes the report and the throughput-per-
dollar plot, labels its figures simulated, and reuses the cached cluster profile on a second run
with another demand (the profile depends on the pipelines, not on demand)."""

from __future__ import annotations

from pathlib import Path

import pytest

JOBS = "pool: {max_nodes: 6}\njobs:\n  - {name: tiny, demand_rows_per_s: %d, pipeline: parse-bound, seed: 5}\n"


def test_intunex_flow_reports_and_reuses_the_cluster_profile(prefect_workspace: dict[str, Path],
                                                            tmp_path: Path) -> None:
    from flows.intunex import intunex
    from optimizers.intunex.request import ClusterRequest

    jobs = tmp_path / "jobs.yaml"
    jobs.write_text(JOBS % 300_000)
    first = intunex(ClusterRequest(jobs=str(jobs), instance_types="c7g.xlarge,c7i.2xlarge"))
    plan = first["plan"]
    assert plan["label"] == "simulated" and plan["all_fed"] is True
    assert "static" in plan["baselines"]
    assert Path(first["report"]).is_file()
    assert any(p.endswith("throughput_per_usd.png") and Path(p).is_file() for p in first["plots"])
    assert first["profile_cache"] == {"intunex": False}
    jobs.write_text(JOBS % 600_000)
    second = intunex(ClusterRequest(jobs=str(jobs), instance_types="c7g.xlarge,c7i.2xlarge"))
    assert second["profile_cache"] == {"intunex": True}
    assert second["plan"]["jobs"]["tiny"]["demand_rows_per_s"] == pytest.approx(600_000)
