"""InTuneX's live loop on a fake machine (no processes): measured rounds, refit, re-plan, stop when
stable, the JSON's shape, and the bad input the CLI refuses before it starts anything."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Mapping

import pytest

from core.errors import UserError
from ingestion.cluster.instances import local_type
from ingestion.cluster.live import JobReading, place
from ingestion.cluster.model import ClusterModel, synthetic_job
from optimizers.intunex.live import live_loop, local_cpus
from optimizers.intunex.planner import Plan
from optimizers.intunex.policies import cluster_policy


NODE = local_type(8)  # the synthetic pipelines need a thread per stage: nodes of 8 CPUs, halves of 4


def _local(demands: tuple[float, float]) -> ClusterModel:
    jobs = [synthetic_job(f"j{i}", d, "parse", 40 + i) for i, d in enumerate(demands)]
    return ClusterModel(jobs, [NODE], 2, fractions=(1.0, 0.5))


class FakeMachine:
    """Each job's capacity is what the first model (``truth``) says of the plan times a hidden
    factor; its trainer takes at most its demand."""

    def __init__(self, truth: ClusterModel, factor: Mapping[str, float]):
        self.truth, self.factor = truth, factor
        self.runs: list[tuple[str, bool]] = []

    def __call__(self, plan: Plan, autotune: bool) -> dict[str, JobReading]:
        self.runs.append((plan.name, autotune))
        out = {}
        for job, supply in self.truth.evaluate(plan.assignment).supply.items():
            capacity = supply * self.factor[job]
            out[job] = JobReading(capacity, min(capacity, plan.result.demand[job]))
        return out


def _half_node_rows(cluster: ClusterModel) -> float:
    from optimizers.intunex.node_agent import NodeTable
    from ingestion.cluster.model import Unit

    return NodeTable(cluster).rows(cluster.jobs[0], Unit(NODE, 0.5))


def test_loop_refits_to_the_measurements_and_stops_when_the_plan_is_stable() -> None:
    half = _half_node_rows(_local((1.0, 1.0)))
    cluster = _local((0.3 * half, 0.3 * half))  # both fit a half node: the plan shares one node
    machine = FakeMachine(cluster, {"j0": 0.8, "j1": 1.0})
    out = live_loop(cluster, machine, cluster_policy(), max_rounds=4)
    rounds = out["rounds"]
    assert len(rounds) == 2 and rounds[0]["replan_same"] and rounds[1]["replan_same"]
    assert rounds[0]["model_error"] == pytest.approx((0.2 / 0.8) / 2)  # j0 off by 1/0.8, j1 exact
    assert rounds[1]["model_error"] == pytest.approx(0.0, abs=1e-6)  # the refitted model predicts what is measured
    assert rounds[0]["refit"]["j0"] == pytest.approx(1 / 0.8)
    assert out["usd_per_h"] == pytest.approx(NODE.usd_per_hour)  # one node
    assert out["all_fed"] and out["label"] == "measured" and out["stable"]
    assert set(out["baselines"]) == {"static", "cachew"}
    static = out["baselines"]["static"]
    assert static["label"] == "measured" and static["usd_per_h"] == pytest.approx(2 * NODE.usd_per_hour)
    assert out["throughput_per_usd"] == pytest.approx(2 * static["throughput_per_usd"])
    assert machine.runs == [("intunex", False)] * 2 + [("static", True), ("cachew", True)]
    json.dumps(out)  # JSON all the way down


def test_a_job_slower_than_modelled_moves_to_a_node_of_its_own() -> None:
    half = _half_node_rows(_local((1.0, 1.0)))
    cluster = _local((0.8 * half, 0.3 * half))
    machine = FakeMachine(cluster, {"j0": 0.5, "j1": 1.0})  # j0 gets 0.4 of a half node's modelled rows: unfed on a half
    out = live_loop(cluster, machine, cluster_policy(), max_rounds=4, baselines=())
    assert len(out["rounds"]) == 3  # the new plan runs twice: the second time on the model refitted to it
    first, last = out["rounds"][0], out["rounds"][-1]
    assert out["rounds"][1]["assignment"] == last["assignment"] and out["rounds"][1]["replan_same"]
    assert [n["share"] for n in first["assignment"]["j0"]["nodes"]] == [0.5]
    assert not first["jobs"]["j0"]["fed"] and not first["replan_same"]
    assert sum(n["share"] for n in last["assignment"]["j0"]["nodes"]) == 1.0
    assert last["jobs"]["j0"]["fed"] and last["all_fed"] and last["model_error"] == pytest.approx(0.0, abs=1e-6)


def test_units_pack_first_fit_decreasing_and_overflow_is_refused() -> None:
    placed = place({"a": [0.5], "b": [1.0, 0.5]}, 2)
    assert sorted((p.job, p.node, p.share) for p in placed) == [("a", 1, 0.5), ("b", 0, 1.0), ("b", 1, 0.5)]
    with pytest.raises(ValueError, match="do not fit"):
        place({"a": [1.0, 1.0, 0.5]}, 2)


def test_local_node_counts_outside_the_cpus_are_user_errors() -> None:
    with pytest.raises(UserError, match="--local-nodes must be between 1 and"):
        local_cpus(0)
    with pytest.raises(UserError, match="one CPU per node"):
        local_cpus(10_000)
    assert local_cpus(1) and len(local_cpus(1)[0]) == 1


@pytest.mark.parametrize("extra, message", [
    (["--local-nodes", "0"], "--local-nodes must be between 1 and"),
    (["--local-nodes", "1", "--simulate"], "does not go with --simulate"),
    (["--local-nodes", "1", "--instance-types", "c7g.*"], "--instance-types does not apply"),
    (["--local-nodes", "1", "--static-type", "c7i.large"], "--static-type does not apply"),
    (["--local-nodes", "1", "--objective", "max-throughput"], "max-throughput needs --budget-usd-per-h"),
    (["--local-nodes", "1", "--baselines", "fastest"], "--baselines: unknown"),
    ([], "give --simulate"),
])
def test_cli_live_bad_input_is_one_line_and_no_json(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                                    extra: list[str], message: str) -> None:
    from trainwise.cli import main

    out = tmp_path / "live.json"
    jobs = Path(__file__).resolve().parents[3] / "configs" / "cluster-local.yaml"
    assert main(["ingest", "cluster", "--jobs", str(jobs), *extra, "--json-out", str(out)]) == 2
    err = capsys.readouterr().err
    assert message in err and "Traceback" not in err and len(err.strip().splitlines()) == 1
    assert not out.exists()


def test_cli_live_refuses_simulated_pipelines_before_starting_anything(tmp_path: Path,
                                                                       capsys: pytest.CaptureFixture[str]) -> None:
    from trainwise.cli import main

    jobs = tmp_path / "jobs.yaml"
    jobs.write_text("jobs:\n  - {name: a, demand_rows_per_s: 1000, pipeline: parse-bound}\n")
    assert main(["ingest", "cluster", "--jobs", str(jobs), "--local-nodes", "1"]) == 2
    assert "pipeline 'parse-bound' is simulated only" in capsys.readouterr().err


def test_the_loop_honours_the_objective_and_the_named_baselines() -> None:
    half = _half_node_rows(_local((1.0, 1.0)))
    cluster = _local((0.3 * half, 0.3 * half))
    machine = FakeMachine(cluster, {"j0": 1.0, "j1": 1.0})
    out = live_loop(cluster, machine, cluster_policy(), max_rounds=2, objective="least-cost",
                    baselines=("static", "intune-fixed", "greedy"))
    assert out["objective"] == "least-cost" and set(out["baselines"]) == {"static", "intune-fixed", "greedy"}
    # static runs tf.data AUTOTUNE live; the others run the configurations their assignments give each unit
    assert [r for r in machine.runs if r[0] != "intunex"] == [("static", True), ("intune-fixed", False), ("greedy", False)]
    assert "each unit's configuration" in out["baselines"]["greedy"]["info"]["live_config"]
    unfeedable = _local((5 * half, 5 * half))
    with pytest.raises(UserError, match="cannot feed every job"):
        live_loop(unfeedable, FakeMachine(unfeedable, {"j0": 1.0, "j1": 1.0}), cluster_policy(), objective="least-cost")


def test_each_configuration_of_a_job_runs_as_its_own_service_paced_by_capacity() -> None:
    from ingestion.cluster.live import paces
    from ingestion.cluster.model import NodeSlot, Unit
    from optimizers.intunex.live import config_groups

    whole, half = Unit(NODE), Unit(NODE, 0.5)
    plan = Plan("p", {"a": [NodeSlot(whole, {"x": 2}), NodeSlot(half, {"x": 1}), NodeSlot(half, {"x": 1})],
                      "b": [NodeSlot(half, {"x": 1})]}, _local((1.0, 1.0)).evaluate({}))
    groups = config_groups(plan)
    assert groups["a"] == [("a#0", {"x": 2}, [1.0]), ("a#1", {"x": 1}, [0.5, 0.5])]
    assert groups["b"] == [("b", {"x": 1}, [0.5])]
    owner = {"a#0": "a", "a#1": "a", "b": "b"}
    got = paces({"a#0": 300.0, "a#1": 100.0, "b": 0.0}, {"a": 200.0, "b": 50.0}, owner)
    assert got == pytest.approx({"a#0": 150.0, "a#1": 50.0, "b": 50.0})


def test_the_refit_weighs_rounds_by_their_spread_instead_of_taking_the_last() -> None:
    from optimizers.intunex.live import Levels
    from optimizers.intunex.node_agent import NodeTable
    from optimizers.intunex.planner import plan_intunex

    half = _half_node_rows(_local((1.0, 1.0)))
    base = _local((0.3 * half, 0.3 * half))
    plan = plan_intunex(base, NodeTable(base), cluster_policy())
    modelled = base.evaluate(plan.assignment).supply

    def jobs(ratio: float, windows: tuple[float, ...]) -> dict:
        return {j: {"capacity_rows_per_s": ratio * modelled[j], "capacity_windows": [w * modelled[j] for w in windows],
                    "capacity_spread": JobReading(0, 0, windows).capacity_spread} for j in modelled}

    levels = Levels(base)
    steady = levels.add(plan, jobs(0.8, (0.79, 0.80, 0.81)))  # spread about 1%: floored at 2%
    assert steady["j0"] == pytest.approx(0.8)
    noisy = levels.add(plan, jobs(1.1, (0.8, 1.1, 1.4)))  # spread 27%: weighs (0.02/0.27)^2 of the steady round
    assert 0.8 < noisy["j0"] < 0.81 and levels.rounds() == {"j0": 2, "j1": 2}
    again = levels.add(plan, jobs(1.0, (0.99, 1.0, 1.01)))
    spread = JobReading(0, 0, (0.8, 1.1, 1.4)).capacity_spread
    weights = [1 / (0.02 * 0.8) ** 2, 1 / (spread * 1.1) ** 2, 1 / (0.02 * 1.0) ** 2]  # inverse variances
    assert again["j0"] == pytest.approx((0.8 * weights[0] + 1.1 * weights[1] + 1.0 * weights[2]) / sum(weights))


class TrainerMachine(FakeMachine):
    """As :class:`FakeMachine`, and the jobs in ``compute`` are read by a trainer that steps at that many
    rows/s with its batches always ready: it takes ``min(capacity, compute)`` and waits for the rest."""

    WINDOW_S = 5.0

    def __init__(self, truth: ClusterModel, compute: Mapping[str, float]):
        super().__init__(truth, {job.name: 1.0 for job in truth.jobs})
        self.compute = compute

    def __call__(self, plan: Plan, autotune: bool) -> dict[str, JobReading]:
        from ingestion.cluster.trainer import TrainerReading

        out = super().__call__(plan, autotune)
        for job, rate in self.compute.items():
            r = out[job]
            rows = int(min(r.capacity_rows_per_s, rate) * self.WINDOW_S)
            trainer = TrainerReading(rows // 100, rows, self.WINDOW_S - rows / rate, rows / rate)
            out[job] = JobReading(r.capacity_rows_per_s, trainer.rows_per_s, r.capacity_windows, trainer)
        return out


def test_a_starving_trainer_raises_its_demand_and_the_loop_replans_for_it() -> None:
    from optimizers.intunex.live import STARVING_WAIT_SHARE

    half = _half_node_rows(_local((1.0, 1.0)))
    cluster = _local((0.3 * half, 0.3 * half))  # j0's demand as measured before planning: both share one node
    machine = TrainerMachine(cluster, {"j0": 1.3 * half})  # j0's trainer steps faster than a half node delivers
    out = live_loop(cluster, machine, cluster_policy(), max_rounds=4, baselines=("static",), margin=0.05)
    first, second = out["rounds"][0], out["rounds"][1]
    t = first["jobs"]["j0"]["trainer"]  # the round's trainer readings are recorded, labelled measured
    assert t["label"] == "measured" and t["input_wait_share"] == pytest.approx(1 - 1 / 1.3, rel=1e-4)
    assert t["starving"] and t["input_wait_share"] > STARVING_WAIT_SHARE and not first["jobs"]["j0"]["fed"]
    assert t["compute_rows_per_s"] == pytest.approx(1.3 * half) and t["rows_per_s"] == pytest.approx(half, rel=1e-4)
    raised = first["demand_raised"]["j0"]
    assert raised["to_rows_per_s"] == pytest.approx(1.3 * half * 1.05) and not first["replan_same"]
    # the next round plans for the raised demand: j0 gets more than half a node and its trainer is fed
    assert second["jobs"]["j0"]["demand_rows_per_s"] == pytest.approx(1.3 * half * 1.05)
    assert sum(n["share"] for n in second["assignment"]["j0"]["nodes"]) > 0.5
    assert not second["jobs"]["j0"]["trainer"]["starving"] and second["jobs"]["j0"]["fed"] and not second["demand_raised"]
    # the job with a numeric demand has no trainer and keeps its demand in every round
    assert all("trainer" not in r["jobs"]["j1"] and r["jobs"]["j1"]["demand_rows_per_s"] == pytest.approx(0.3 * half)
               and "j1" not in r["demand_raised"] for r in out["rounds"])
    assert out["stable"] and len(out["rounds"]) <= 4 and out["all_fed"]
    # throughput per dollar counts what the trainer trained on; the static baseline runs the same trainer
    last = out["rounds"][-1]["jobs"]
    assert out["delivered_rows_per_s"] == pytest.approx(last["j0"]["trainer"]["rows_per_s"] + 0.3 * half, rel=1e-4)
    assert out["baselines"]["static"]["jobs"]["j0"]["trainer"]["label"] == "measured"
    assert out["demand_rule"]["starving_wait_share"] == STARVING_WAIT_SHARE
    json.dumps(out)


def test_a_trainer_the_pool_cannot_feed_ends_the_loop_unfed() -> None:
    half = _half_node_rows(_local((1.0, 1.0)))
    cluster = _local((0.3 * half, 0.3 * half))
    machine = TrainerMachine(cluster, {"j0": 50 * half})  # no pool of two nodes keeps up with it
    out = live_loop(cluster, machine, cluster_policy(), max_rounds=2, baselines=())
    assert len(out["rounds"]) == 2 and not out["stable"]  # raised in round 1: round 2 is the last allowed
    out = live_loop(cluster, machine, cluster_policy(), max_rounds=6, baselines=())
    rounds = out["rounds"]
    assert all(r["jobs"]["j0"]["trainer"]["starving"] and not r["jobs"]["j0"]["fed"] for r in rounds)
    assert rounds[0]["demand_raised"]["j0"]["to_rows_per_s"] == pytest.approx(50 * half * 1.05)
    # raised once to what the trainer computes at; the best plan the pool allows then runs twice, and the loop ends
    assert not any(r["demand_raised"] for r in rounds[1:]) and out["stable"] and len(rounds) == 3
    assert not out["all_fed"]


def test_a_trainer_not_starving_keeps_its_demand_and_is_fed_below_it() -> None:
    half = _half_node_rows(_local((1.0, 1.0)))
    cluster = _local((0.3 * half, 0.3 * half))
    machine = TrainerMachine(cluster, {"j0": 0.2 * half})  # slower than measured before planning: never waits
    out = live_loop(cluster, machine, cluster_policy(), max_rounds=4, baselines=())
    j0 = out["rounds"][0]["jobs"]["j0"]
    assert j0["trainer"]["input_wait_share"] == pytest.approx(0.0, abs=1e-4) and j0["fed"]  # fed by its own wait, below its demand
    assert j0["delivered_rows_per_s"] < 0.95 * j0["demand_rows_per_s"]
    assert not any(r["demand_raised"] for r in out["rounds"]) and out["stable"] and len(out["rounds"]) == 2


def test_cli_live_gives_a_trainer_to_the_measured_jobs_only(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                           capsys: pytest.CaptureFixture[str]) -> None:
    from ingestion.cluster import trainer as trainer_module
    from ingestion.cluster.trainer import Demand
    from optimizers.intunex import live as live_module
    from trainwise.cli import main

    jobs = tmp_path / "jobs.yaml"
    jobs.write_text("jobs:\n  - {name: a, demand_rows_per_s: measure, trainer: dlrm, pipeline: dlrm-tsv}\n"
                    "  - {name: b, demand_rows_per_s: 9000, pipeline: dlrm-tsv}\n")
    monkeypatch.setattr(trainer_module, "measure_demand",
                        lambda name: Demand(name, 1050.0, 1000.0, (990.0, 1000.0, 1010.0), 0.01, 0.05, 1024))
    seen = {}

    def run_live(spec, nodes, **kwargs):  # the live loop itself is tested above on a fake machine
        seen.update(demands={j.name: j.demand_rows_per_s for j in spec.jobs}, trainers=kwargs["trainers"])
        job = {"delivered_rows_per_s": 1.0, "demand_rows_per_s": 1.0, "trainer": {"input_wait_share": 0.02}}
        return {"label": "measured", "rounds": [{"model_error": 0.0}], "throughput_per_usd": 1.0, "usd_per_h": 1.0,
                "all_fed": True, "jobs": {"a": job}, "assignment": {"a": {"nodes": []}}, "baselines": {}}

    monkeypatch.setattr(live_module, "run_live", run_live)
    out = tmp_path / "live.json"
    assert main(["ingest", "cluster", "--jobs", str(jobs), "--local-nodes", "1", "--json-out", str(out)]) == 0
    assert seen == {"demands": {"a": 1050.0, "b": 9000.0}, "trainers": {"a": "dlrm"}}  # b keeps its number, no trainer
    assert json.loads(out.read_text())["measured_demand"]["a"]["demand_rows_per_s"] == 1050.0
    assert "its trainer waited 2.0% of its step time for input" in capsys.readouterr().err


def test_cli_live_with_a_trainer_that_cannot_be_imported_is_one_line(tmp_path: Path,
                                                                     capsys: pytest.CaptureFixture[str]) -> None:
    from trainwise.cli import main

    jobs = tmp_path / "jobs.yaml"
    jobs.write_text("jobs:\n  - {name: a, demand_rows_per_s: measure, trainer: 'nosuch_module_x:f', pipeline: dlrm-tsv}\n")
    out = tmp_path / "live.json"
    assert main(["ingest", "cluster", "--jobs", str(jobs), "--local-nodes", "1", "--json-out", str(out)]) == 2
    err = capsys.readouterr().err
    assert "cannot import 'nosuch_module_x'" in err and "Traceback" not in err and len(err.strip().splitlines()) == 1
    assert not out.exists()
