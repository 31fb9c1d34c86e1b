"""InTuneX on the cluster model: jobs-file validation, the model's accounting, both agents' plans
(fed, within pool and budget, no OOM, never cheaper than the exact oracle), re-planning, the CLI."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from core.errors import UserError
from ingestion.cluster.instances import by_name, select
from ingestion.cluster.jobs import load_jobs, parse_jobs
from ingestion.cluster.model import ClusterModel, NodeSlot, Unit, synthetic_job
from optimizers.intunex.baselines import oracle, run_baselines
from optimizers.intunex.node_agent import NodeTable, autotune_node, tune_node
from optimizers.intunex.planner import plan_intunex, replan
from optimizers.intunex.policies import cluster_policy, node_agent

TYPES = ("c7g.xlarge", "c7g.2xlarge", "c7i.2xlarge", "r7i.xlarge")


def _cluster(demands=(600_000.0, 250_000.0), max_nodes=16, budget=None) -> ClusterModel:
    kinds = ("parse", "transform")
    jobs = [synthetic_job(f"j{i}", d, kinds[i % 2], 40 + i) for i, d in enumerate(demands)]
    return ClusterModel(jobs, [by_name(t) for t in TYPES], max_nodes, budget)


def test_bad_jobs_fields_are_named_in_one_line(tmp_path: Path) -> None:
    with pytest.raises(UserError, match=r"jobs\[0\]\.demand_rows_per_s: must be > 0, got -5"):
        parse_jobs({"jobs": [{"name": "x", "demand_rows_per_s": -5}]})
    with pytest.raises(UserError, match=r"jobs\[1\]\.pipeline: must be one of"):
        parse_jobs({"jobs": [{"name": "a", "demand_rows_per_s": 1}, {"name": "b", "demand_rows_per_s": 1, "pipeline": "x"}]})
    with pytest.raises(UserError, match="unique"):
        parse_jobs({"jobs": [{"name": "a", "demand_rows_per_s": 1}, {"name": "a", "demand_rows_per_s": 2}]})
    with pytest.raises(UserError, match="no such file"):
        load_jobs(tmp_path / "missing.yaml")
    with pytest.raises(UserError, match="matches no instance type"):
        select(["z9.large"])
    assert {t.name for t in select(["c7g.*"])} >= {"c7g.large", "c7g.16xlarge"}


def test_model_packs_shares_into_whole_nodes_and_caps_delivery() -> None:
    cluster = _cluster()
    job = cluster.jobs[0]
    half = Unit(by_name("c7g.2xlarge"), 0.5)
    config = autotune_node(job.pipeline, cluster.space(job, half), half.node).config
    two_halves = cluster.evaluate({"j0": [NodeSlot(half, config)] * 2, "j1": []})
    assert two_halves.nodes == {"c7g.2xlarge": 1}
    assert two_halves.usd_per_h == pytest.approx(by_name("c7g.2xlarge").usd_per_hour)
    three = cluster.evaluate({"j0": [NodeSlot(half, config)] * 3, "j1": []})
    assert three.nodes == {"c7g.2xlarge": 2}
    assert three.delivered <= job.demand_rows_per_s and not three.fed["j1"]


def test_node_agent_is_memory_safe_and_not_worse_than_autotune() -> None:
    cluster = _cluster()
    job, unit = cluster.jobs[0], Unit(by_name("c7g.2xlarge"))
    space = cluster.space(job, unit)
    chosen = tune_node(node_agent(), job.pipeline, space, unit.node)
    auto = autotune_node(job.pipeline, space, unit.node)
    assert space.is_valid(chosen.config)
    rows, oom = cluster.node_rows_per_s(job, unit, chosen.config)
    assert not oom and rows > 0
    assert chosen.rows_per_s >= auto.rows_per_s * (1 - 1e-9)


def test_plan_feeds_every_job_within_the_pool_and_is_no_cheaper_than_the_oracle() -> None:
    cluster = _cluster()
    nodes = NodeTable(cluster)
    plan = plan_intunex(cluster, nodes, cluster_policy())
    assert plan.result.all_fed and plan.result.oom == 0
    assert sum(plan.result.nodes.values()) <= cluster.max_nodes
    for slots in plan.assignment.values():
        for s in slots:
            space = cluster.space(cluster.jobs[0], s.unit)
            assert space is not None and space.cpu_used(s.config) <= s.unit.vcpus
    best = oracle(cluster, nodes)
    assert best is not None and best.result.all_fed
    assert best.result.usd_per_h <= plan.result.usd_per_h * (1 + 1e-9)
    others = run_baselines(cluster, nodes, ("static", "cachew"))
    assert plan.result.throughput_per_usd >= others["static"].result.throughput_per_usd


def test_budget_and_pool_are_never_overrun() -> None:
    tight = _cluster(demands=(5_000_000.0, 3_000_000.0), max_nodes=3, budget=0.5)
    nodes = NodeTable(tight)
    plan = plan_intunex(tight, nodes, cluster_policy())
    assert plan.result.usd_per_h <= 0.5 + 1e-9
    assert sum(plan.result.nodes.values()) <= 3
    assert not plan.result.all_fed
    with pytest.raises(UserError, match="cannot feed every job"):
        plan_intunex(tight, nodes, cluster_policy(), objective="least-cost")
    with pytest.raises(UserError, match="needs --budget-usd-per-h"):
        plan_intunex(_cluster(), nodes, cluster_policy(), objective="max-throughput")


def test_replan_after_demand_grows_keeps_what_serves() -> None:
    cluster = _cluster()
    nodes = NodeTable(cluster)
    first = plan_intunex(cluster, nodes, cluster_policy())
    grown = _cluster(demands=(600_000.0, 900_000.0))
    second = replan(grown, NodeTable(grown), cluster_policy(), first)
    assert second.result.all_fed
    assert second.result.usd_per_h >= first.result.usd_per_h
    assert second.info["replan"]["units_before"] == {j: len(s) for j, s in first.assignment.items()}


def test_cli_bad_jobs_file_exits_2_without_traceback(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from trainwise.cli import main

    bad = tmp_path / "jobs.yaml"
    bad.write_text("jobs:\n  - name: x\n    demand_rows_per_s: -5\n")
    out = tmp_path / "out.json"
    assert main(["ingest", "cluster", "--jobs", str(bad), "--simulate", "--json-out", str(out)]) == 2
    err = capsys.readouterr().err
    assert "jobs[0].demand_rows_per_s: must be > 0" in err and "Traceback" not in err
    assert not out.exists()


def test_cli_plans_and_writes_tfvars(tmp_path: Path) -> None:
    from trainwise.cli import main

    jobs = tmp_path / "jobs.yaml"
    jobs.write_text("pool: {max_nodes: 8}\njobs:\n  - {name: a, demand_rows_per_s: 500000, pipeline: parse-bound, seed: 3}\n")
    out, tfvars = tmp_path / "plan.json", tmp_path / "plan.tfvars.json"
    assert main(["ingest", "cluster", "--jobs", str(jobs), "--simulate", "--instance-types", "c7g.xlarge,c7i.2xlarge",
                 "--baselines", "static", "--write-tfvars", str(tfvars), "--json-out", str(out)]) == 0
    d = json.loads(out.read_text())
    assert d["label"] == "simulated" and d["all_fed"] is True
    assert set(d["baselines"]) == {"static"}
    nodes = d["assignment"]["a"]["nodes"]
    assert nodes and all({"instance_type", "config"} <= set(n) for n in nodes)
    pools = json.loads(tfvars.read_text())["ingest_pools"]
    assert sum(p["count"] for p in pools) == d["nodes"]


def test_refit_on_measurements_replans_to_feed_a_slower_job() -> None:
    from optimizers.intunex.planner import refit_and_replan

    cluster = _cluster()
    plan = plan_intunex(cluster, NodeTable(cluster), cluster_policy())
    measured = {"j0": 0.6 * plan.result.supply["j0"]}  # the live job ran at 60% of the model's figure
    refitted, again = refit_and_replan(cluster, cluster_policy(), plan, measured)
    assert refitted.evaluate(plan.assignment).supply["j0"] == pytest.approx(measured["j0"], rel=0.02)
    assert not refitted.evaluate(plan.assignment).fed["j0"]  # the old plan no longer feeds it
    assert again.result.all_fed and again.result.oom == 0
    assert again.info["refit"]["j0"] == pytest.approx(1 / 0.6)
