"""The exact bound (MILP on the planner's table), the share-trimming move, what-if clusters and the
``--what-if`` CLI: the bound equals brute force on small tables, a plan is never better than it,
and bad what-ifs are one line with exit 2."""

from __future__ import annotations

import itertools
import json
from pathlib import Path

import numpy as np
import pytest

from core.errors import UserError
from optimizers.intunex.bound import solve_bound
from optimizers.intunex.cluster_agent import Problem, State, trim_shares


def _problem(budget: float | None = None, objective: str = "throughput-per-usd", max_nodes: int = 6) -> Problem:
    # two jobs; units: a whole node of type 0, half of type 0, a whole node of type 1
    rows = np.array([[100.0, 55.0, 70.0], [80.0, 40.0, 90.0]])
    return Problem(rows, np.array([170.0, 120.0]), np.array([0, 0, 1]), np.array([1.0, 0.5, 1.0]),
                   np.array([1.0, 0.8]), max_nodes, budget, objective, np.array([4.0, 4.0, 4.0]))


def _brute(p: Problem, most: int = 3) -> list[State]:
    n = p.rows.size
    out = []
    for flat in itertools.product(range(most + 1), repeat=n):
        s = State(p, np.array(flat).reshape(p.rows.shape))
        if s.nodes.sum() <= p.max_nodes and (p.budget is None or s.cost <= p.budget + 1e-9):
            out.append(s)
    return out


def test_bound_is_the_least_cost_that_feeds_every_job() -> None:
    p = _problem()
    found = solve_bound(p)
    best = min(s.cost for s in _brute(p) if s.fed.all())
    assert found.proven_optimal and found.usd_per_h == pytest.approx(best)
    assert State(p, found.counts).fed.all()
    assert found.best_possible == pytest.approx(p.demand.sum() * 3600 / best)
    assert found.gap(found.best_possible) == 0.0 and found.gap(0.5 * found.best_possible) == pytest.approx(0.5)


def test_max_throughput_bound_delivers_the_most_within_the_budget_at_least_cost() -> None:
    p = _problem(budget=1.9, objective="max-throughput")
    found = solve_bound(p)
    feasible = _brute(p)
    most = max(s.delivered for s in feasible)
    assert found.metric == "delivered_rows_per_s" and found.best_possible == pytest.approx(most)
    cheapest = min(s.cost for s in feasible if s.delivered >= most - 1e-6)
    assert found.usd_per_h == pytest.approx(cheapest) and found.usd_per_h <= 1.9 + 1e-9


def test_no_assignment_feeds_every_job_gives_no_bound() -> None:
    found = solve_bound(_problem(max_nodes=1))
    assert found.counts is None and found.best_possible is None and found.gap(1.0) is None


def test_trimming_takes_surplus_off_a_job_and_keeps_every_job_fed() -> None:
    p = _problem()
    state = State(p, np.array([[2, 0, 0], [0, 0, 2]]))  # 200 for 170 and 180 for 120: both over-fed
    trimmed = trim_shares(state)
    assert trimmed.fed.all()
    assert trimmed.shares @ p.type_price < state.shares @ p.type_price
    assert trimmed.nodes.sum() <= p.max_nodes


def test_plan_is_never_better_than_the_bound_and_reports_the_gap() -> None:
    from ingestion.cluster.instances import select
    from ingestion.cluster.model import from_jobs_file
    from optimizers.intunex.node_agent import NodeTable
    from optimizers.intunex.planner import bound_report, plan_intunex
    from optimizers.intunex.policies import cluster_policy
    from optimizers.intunex.whatif import synthetic_spec

    spec = synthetic_spec(8, 3, 3, seed=7)
    cluster = from_jobs_file(spec, select(spec.pool.instance_types))
    nodes = NodeTable(cluster)
    plan = plan_intunex(cluster, nodes, cluster_policy(), seed=7)
    report = bound_report(cluster, nodes, plan)
    assert plan.result.all_fed
    assert report["bound"]["usd_per_h"] <= plan.result.usd_per_h + 1e-9
    assert report["gap_to_bound"] == pytest.approx(1 - report["bound"]["usd_per_h"] / plan.result.usd_per_h, abs=1e-5)


def test_what_if_sizes_and_specs_are_checked_in_one_line() -> None:
    from optimizers.intunex.whatif import parse_what_if, synthetic_spec

    assert parse_what_if("nodes=100,jobs=40") == (100, 40, 12, 0)
    assert parse_what_if("nodes=30, jobs=5, types=4, seed=3") == (30, 5, 4, 3)
    for bad, message in (("nodes=10,jobs=40", "more jobs"), ("nodes=10", "jobs missing"), ("nodes=x,jobs=2", "whole number"),
                         ("cores=3,jobs=2", "not KEY=N"), ("nodes=10,jobs=2,types=99", "types must be")):
        with pytest.raises(UserError, match=message):
            parse_what_if(bad)
    a, b = synthetic_spec(20, 6, 5, seed=4), synthetic_spec(20, 6, 5, seed=4)
    assert a == b and len(a.jobs) == 6 and len(a.pool.instance_types or []) == 5 and a.pool.max_nodes == 20


def test_cli_what_if_with_more_jobs_than_nodes_is_one_line_exit_2(tmp_path: Path,
                                                                  capsys: pytest.CaptureFixture[str]) -> None:
    from trainwise.cli import main

    out = tmp_path / "w.json"
    assert main(["ingest", "cluster", "--simulate", "--what-if", "nodes=10,jobs=40", "--json-out", str(out)]) == 2
    err = capsys.readouterr().err
    assert "more jobs (40) than nodes (10)" in err and "Traceback" not in err and len(err.strip().splitlines()) == 1
    assert not out.exists()
    jobs = tmp_path / "jobs.yaml"
    jobs.write_text("pool: {max_nodes: 1}\njobs:\n  - {name: a, demand_rows_per_s: 5}\n  - {name: b, demand_rows_per_s: 5}\n")
    assert main(["ingest", "cluster", "--simulate", "--what-if", "jobs", "--jobs", str(jobs), "--json-out", str(out)]) == 2
    assert "more jobs (2) than nodes (1)" in capsys.readouterr().err and not out.exists()


def test_cli_what_if_plans_with_the_bound_and_draws_the_budget_front(tmp_path: Path) -> None:
    from trainwise.cli import main

    out = tmp_path / "w.json"
    assert main(["ingest", "cluster", "--simulate", "--what-if", "nodes=6,jobs=2,types=2,seed=1", "--baselines",
                 "static,greedy", "--json-out", str(out)]) == 0
    d = json.loads(out.read_text())
    assert d["label"] == "simulated" and set(d["baselines"]) == {"static", "greedy"}
    assert d["gap_to_bound"] is not None and 0.0 <= d["gap_to_bound"] < 1.0
    front = d["budget_front"]
    assert len(front) >= 5 and all(p["plan_usd_per_h"] <= p["budget_usd_per_h"] + 1e-9 for p in front)
    assert all(p["bound_delivered_rows_per_s"] >= p["plan_delivered_rows_per_s"] - 1e-6 for p in front)
    png = Path(d["plot"])
    assert png == out.with_suffix(".png") and png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
