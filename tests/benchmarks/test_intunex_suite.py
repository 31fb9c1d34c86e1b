"""The random jobs files of the InTuneX suite: seeded, within the stated ranges, valid, mixed pools."""

from __future__ import annotations

from benchmarks.intunex_suite import TIGHT_USD_PER_NODE_H, random_jobs_file
from ingestion.cluster.jobs import parse_jobs


def test_random_jobs_files_are_seeded_valid_and_in_range() -> None:
    specs = [random_jobs_file(seed) for seed in range(1, 13)]
    assert random_jobs_file(3) == specs[2]
    for spec in specs:
        parsed = parse_jobs(spec)
        assert 3 <= len(parsed.jobs) <= 8 and 4 <= parsed.pool.max_nodes <= 16
        families = {t.split(".")[0] for t in parsed.pool.instance_types or []}
        assert len(families) >= 2 and any(f.endswith("g") for f in families)  # mixed, with an Arm family
        assert parsed.budget_usd_per_h in (None, TIGHT_USD_PER_NODE_H * parsed.pool.max_nodes)
    assert {s.get("budget_usd_per_h") is None for s in specs} == {True, False}  # tight and loose budgets
