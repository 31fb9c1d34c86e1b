"""The series and sweep benchmark (benchmarks/seraph_history.py): its arithmetic on recorded or
fake CLI JSON, the order and arguments of its CLI runs, and its errors."""

from __future__ import annotations

import json
import sys

import pytest

import benchmarks.seraph_history as sh
from benchmarks.seraph_history import (
    CliFailed, arm_of, parse_seeds, seeds_arg, summarise, summarise_series, summarise_sweep, sweep_record, tune_record,
)


def test_seeds_are_ranges_or_lists_in_order_and_bad_ones_are_named():
    assert parse_seeds("0-9") == list(range(10))
    assert parse_seeds("0-2,5") == [0, 1, 2, 5] and parse_seeds("3,1,3") == [3, 1]
    for bad in ("", "a", "5-2", "-1", "0-", "1,,2"):
        with pytest.raises(ValueError, match="--seeds"):
            parse_seeds(bad)
    assert seeds_arg([0, 1, 2, 3, 4, 5]) == "0-5" and seeds_arg([0, 2]) == "0,2"


def _tune_json(cost, time_s, steps=4000, reached=True, **extra):
    return {"plan": {"config": {"actors": 2, "memory_mb": 1769, "batch": 1000}, **extra.pop("plan", {})},
            "achieved": {"reached": reached, "env_steps": steps, "cost_usd": cost, "lambda_time_s": time_s},
            "phases": [{"phase": "pilot"}, {"config": {"actors": 2, "memory_mb": 1769, "batch": 1000}}], **extra}


def test_a_tune_run_is_read_from_its_json_whatever_names_the_arm():
    row = tune_record(_tune_json(1.0, 2.0, arm="smaller_batch"), seed=4, k=5)
    assert (row["k"], row["seed"], row["arm"], row["cost_usd"], row["lambda_time_s"]) == (5, 4, "smaller_batch", 1.0, 2.0)
    assert row["config"]["batch"] == 1000 and row["phase_configs"] == [{"actors": 2, "memory_mb": 1769, "batch": 1000}]
    assert arm_of(_tune_json(1.0, 1.0, plan={"history": {"arm": {"name": "wider_layout", "runs": 3}}})) == "wider_layout"
    assert arm_of(_tune_json(1.0, 1.0)) is None  # no history in this version of the CLI: no arm, no error
    with pytest.raises(CliFailed, match="rl tune seed 4: its JSON has no cost_usd"):
        tune_record({"achieved": {"reached": True, "env_steps": 1, "lambda_time_s": 1.0}}, seed=4, k=1)


def _static(seed, cost, time_s, steps=4000):
    return {"seed": seed, "reached": True, "env_steps": steps, "cost_usd": cost, "lambda_time_s": time_s}


def _series(costs, times, static_costs=None, static_times=None):
    rows = [{**tune_record(_tune_json(c, t), seed=s, k=s + 1)} for s, (c, t) in enumerate(zip(costs, times))]
    static = [_static(s, c, t) for s, (c, t) in enumerate(zip(static_costs or [1.0] * len(costs),
                                                               static_times or [10.0] * len(costs)))]
    return rows, static


def test_the_cumulative_bill_the_late_sum_and_the_late_median_time():
    # runs 1-2 dearer than the static default (the history is empty), cheaper from run 3 on
    costs = [1.2, 1.1, 0.8, 0.7, 0.7, 0.6, 0.6, 0.5, 0.7, 0.6]
    times = [12.0, 11.0, 9.0, 5.0, 6.0, 7.0, 5.0, 6.0, 9.0, 20.0]
    rows, static = _series(costs, times)
    s = summarise_series("Acrobot-v1", "cost", rows, static)
    cumulative = [r["cumulative_cost_ratio"] for r in s["per_run"]]
    assert cumulative[:3] == pytest.approx([1.2, 2.3 / 2, 3.1 / 3])
    assert cumulative[-1] == pytest.approx(sum(costs) / 10)
    assert s["worst_cumulative_cost_ratio"] == {"k": 1, "value": pytest.approx(1.2)}
    late = s["late_cost_sum_ratio"]
    assert late["estimate"] == pytest.approx(sum(costs[5:]) / 5) and late["runs"] == 5 and late["complete"]
    assert late["interval"]["low"] <= late["estimate"] <= late["interval"]["high"]
    # median time over runs 4-10 (5, 6, 7, 5, 6, 9, 20: median 6) over the static default's (10)
    assert s["late_median_time_ratio"]["estimate"] == pytest.approx(0.6)
    bars = s["bars"]
    assert bars["late_cost_sum_ratio"]["met"] is True  # 0.6 <= 0.75
    assert bars["cumulative_cost_ratio_at_every_k"]["met"] is False  # run 1 alone cost 1.2x
    speed = summarise_series("Acrobot-v1", "speed", rows, static)["bars"]
    assert speed == {"late_median_time_ratio": {"bar": 0.7, "value": pytest.approx(0.6), "met": True}}
    # Pendulum's bar for the late sum is 1.0
    assert summarise_series("Pendulum-v1", "cost", rows, static)["bars"]["late_cost_sum_ratio"]["bar"] == 1.0


def test_a_short_series_reports_what_it_has_and_judges_no_bar():
    rows, static = _series([0.5, 1.0, 1.5], [5.0, 5.0, 5.0])
    s = summarise_series("Acrobot-v1", "cost", rows, static)
    assert [r["cumulative_cost_ratio"] for r in s["per_run"]] == pytest.approx([0.5, 0.75, 1.0])
    assert s["late_cost_sum_ratio"]["estimate"] is None and s["late_cost_sum_ratio"]["runs"] == 0
    assert s["cost_sum_ratio"]["estimate"] == pytest.approx(1.0) and s["cost_sum_ratio"]["runs"] == 3
    assert all(b["met"] is None for b in s["bars"].values())
    # a tune run whose static run is missing is left out of every ratio, not paired with another seed
    s2 = summarise_series("Acrobot-v1", "cost", rows, static[:2])
    assert s2["runs"] == 2 and s2["per_run"][-1]["seed"] == 1


def test_the_static_repeat_control_and_the_sweep_total():
    static = [_static(s, 1.0, 10.0) for s in range(6)]
    repeat = [_static(s, 1.1 if s % 2 else 0.9, 10.0) for s in range(6)]
    sweep_json = {"runs": [{"seed": s, "reached": s != 3, "env_steps": 2000, "cost_usd": 0.5, "lambda_time_s": 6.0,
                            "configs": [{"actors": 2, "memory_mb": 1769, "batch": 1000}]} for s in range(6)],
                  "total": {"cost_usd": 3.6, "wall_s": 50.0}}
    res = {"env": "x", "seeds": list(range(6)), "sweep": sweep_record(sweep_json), "static": static, "static_repeat": repeat}
    out = summarise(res)
    assert out["control"]["cost_sum_ratio"]["estimate"] == pytest.approx(1.0) and out["control"]["env_steps_equal"]
    sweep = out["sweep"]
    assert sweep["total_cost_ratio"] == pytest.approx(3.6 / 6.0)  # pilots and probes (the 0.6 over the runs) counted
    assert sweep["runs_cost_sum_ratio"]["estimate"] == pytest.approx(0.5)
    assert sweep["every_seed_reached"] is False and sweep["bars"]["every_seed_reached"] is False
    assert sweep["bars"]["total_cost_ratio"]["met"] is True
    with pytest.raises(CliFailed, match="no 'runs' list or no 'total'"):
        sweep_record({"runs": []})
    # a seed the sweep did not run at all is a seed that did not reach
    runs = [{**r, "reached": True} for r in res["sweep"]["runs"] if r["seed"] != 3]
    assert summarise_sweep({**res, "sweep": {**res["sweep"], "runs": runs}})["every_seed_reached"] is False
    everyone = [{**r, "reached": True} for r in res["sweep"]["runs"]]
    assert summarise_sweep({**res, "sweep": {**res["sweep"], "runs": everyone}})["every_seed_reached"] is True


class FakeCli:
    """Stands in for the CLI: records each run's arguments and home, answers with fake JSON."""

    def __init__(self, work, costs=None):
        self.work, self.calls, self.costs = work, [], costs or {}

    def run(self, args, home, name, seraph=True):
        self.calls.append((list(args), home.name, seraph))
        seed = int(args[args.index("--seed") + 1]) if "--seed" in args else None
        if args[1] == "tune":
            return _tune_json(self.costs.get(seed, 0.5), 5.0)
        if args[1] == "sweep":
            return {"runs": [{"seed": s, "reached": True, "env_steps": 1, "cost_usd": 0.5, "lambda_time_s": 1.0}
                             for s in parse_seeds(args[args.index("--seeds") + 1])], "total": {"cost_usd": 3.3}}
        return {**_static(seed, 1.0, 10.0)}


def test_a_series_runs_seed_after_seed_each_objective_in_its_own_home_beside_the_static_default(tmp_path):
    from optimizers.seraph.baseline import STATIC_DEFAULT_CONFIG as S

    cli, saves = FakeCli(tmp_path), []
    res = sh.run_series(cli, "Acrobot-v1", -100.0, [3, 4], ["cost", "speed"], 12345, True, lambda r: saves.append(1))
    order = [(c[0][1], c[0][c[0].index("--seed") + 1], c[1]) for c in cli.calls]
    assert order == [
        ("tune", "3", "home-Acrobot-v1-cost"), ("tune", "3", "home-Acrobot-v1-speed"),
        ("train", "3", "home-Acrobot-v1-static"), ("train", "3", "home-Acrobot-v1-static_repeat"),
        ("tune", "4", "home-Acrobot-v1-cost"), ("tune", "4", "home-Acrobot-v1-speed"),
        ("train", "4", "home-Acrobot-v1-static"), ("train", "4", "home-Acrobot-v1-static_repeat"),
    ]
    assert len(saves) == 6  # after every tune run and every seed's static runs
    tune_args, _, seraph = cli.calls[0]
    assert seraph and tune_args[tune_args.index("--objective") + 1] == "cost"
    static_args, _, seraph = cli.calls[2]
    assert not seraph
    flag = lambda args, f: args[args.index(f) + 1]  # noqa: E731
    assert [flag(static_args, f) for f in ("--actors", "--memory-mb", "--batch", "--steps-per-env")] == [
        str(S.actors), str(S.memory_mb), str(S.batch), str(S.steps_per_env)]
    assert flag(static_args, "--max-steps") == flag(tune_args, "--max-steps") == "12345"  # one learning-rate schedule
    assert [r["k"] for r in res["series"]["cost"]] == [1, 2] and len(res["static_repeat"]) == 2


def test_a_sweep_is_one_cli_run_then_one_static_run_per_seed(tmp_path):
    cli = FakeCli(tmp_path)
    res = sh.run_sweep(cli, "benchmarks.beacon_env:BeaconContinuous-v0", -8.0, list(range(6)), "cost", 3, None, False,
                       lambda r: None)
    args = cli.calls[0][0]
    assert args[:2] == ["rl", "sweep"] and args[args.index("--seeds") + 1] == "0-5"
    assert args[args.index("--concurrency") + 1] == "3" and "--max-steps" not in args
    assert [c[0][1] for c in cli.calls[1:]] == ["train"] * 6
    assert summarise(res)["sweep"]["total_cost_ratio"] == pytest.approx(3.3 / 6)


def test_main_writes_a_result_that_rescore_reads_and_a_failed_run_keeps_the_ones_before(tmp_path, monkeypatch, capsys):
    class Cli(FakeCli):
        def __init__(self, work, **kw):
            super().__init__(work, costs={0: 1.5, 1: 0.5})

    monkeypatch.setattr(sh, "Cli", Cli)
    out = tmp_path / "r.json"
    assert sh.main(["--envs", "Acrobot-v1", "--seeds", "0-1", "--objectives", "cost", "--work-dir",
                    str(tmp_path / "w"), "--json-out", str(out)]) == 0
    saved = json.loads(out.read_text())
    assert saved["complete"] and saved["envs"][0]["summary"]["series"]["cost"]["cost_sum_ratio"]["estimate"] == 1.0
    capsys.readouterr()
    assert sh.main(["--rescore", str(out)]) == 0
    assert "cumulative bill ratio, worst k: 1.500 (k=1)" in capsys.readouterr().out
    with pytest.raises(SystemExit, match="not a readable seraph_history result"):
        sh.main(["--rescore", str(tmp_path / "missing.json")])

    class Failing(Cli):
        def run(self, args, home, name, seraph=True):
            if args[1] == "train" and "1" == args[args.index("--seed") + 1]:
                raise CliFailed(f"{name}: exit 2: error: bad")
            return super().run(args, home, name, seraph)

    monkeypatch.setattr(sh, "Cli", Failing)
    assert sh.main(["--envs", "Acrobot-v1", "--seeds", "0-1", "--objectives", "cost", "--work-dir",
                    str(tmp_path / "w2"), "--json-out", str(out)]) == 1
    assert "exit 2: error: bad" in capsys.readouterr().err
    partial = json.loads(out.read_text())
    assert not partial["complete"] and len(partial["envs"][0]["series"]["cost"]) == 2


@pytest.mark.parametrize("argv, message", [
    (["--seeds", ""], "--seeds is empty"),
    (["--envs", "Nope-v0"], "unknown env"),
    (["--objectives", "cheap"], "allowed: cost, speed, balanced"),
    (["--concurrency", "2"], "--concurrency K needs --mode sweep"),
])
def test_bad_arguments_are_one_line_usage_errors(argv, message, capsys):
    with pytest.raises(SystemExit) as exc:
        sh.main(argv)
    assert exc.value.code == 2 and message in capsys.readouterr().err


def test_a_work_dir_in_use_is_refused(tmp_path, capsys):
    (tmp_path / "old").write_text("x")
    with pytest.raises(SystemExit):
        sh.main(["--work-dir", str(tmp_path)])
    assert "fresh TRAINWISE_HOME" in capsys.readouterr().err


def test_the_subprocess_runs_this_checkout_in_its_own_home_and_ignores_references_in_it(tmp_path, monkeypatch):
    from optimizers.seraph.references import ignoring_references

    cli = sh.Cli(tmp_path, ignore_references=True)
    env = cli.environment(tmp_path / "home")
    assert env["PYTHONPATH"].split(":")[0] == str(sh.REPO) and env["TRAINWISE_HOME"] == str(tmp_path / "home")
    assert env["TRAINWISE_STATE"] == "local"
    assert cli.command(["rl", "train"], seraph=False)[1:3] == ["-m", "trainwise"]
    command = cli.command(["rl", "tune", "--env", "X"], seraph=True)
    assert command[1] == "-c" and command[3:] == ["rl", "tune", "--env", "X"]
    # the wrapper runs the CLI inside references_ignored, with the arguments it was given
    seen = []
    import trainwise.cli

    monkeypatch.setattr(trainwise.cli, "main", lambda argv: seen.append((argv, ignoring_references())) or 0)
    monkeypatch.setattr(sys, "argv", ["-c", "rl", "tune"])
    with pytest.raises(SystemExit) as exc:
        exec(command[2], {})
    assert exc.value.code == 0 and seen == [(["rl", "tune"], True)]
    assert not ignoring_references()


def test_a_cli_run_that_fails_is_one_line_naming_its_error_and_log(tmp_path):
    cli = sh.Cli(tmp_path)
    with pytest.raises(CliFailed) as exc:
        cli.run(["rl", "train", "--env", "NoSuchEnv-v9", "--target-reward", "1"], tmp_path / "home", "bad", seraph=False)
    message = str(exc.value)
    assert "bad: exit 2" in message and "NoSuchEnv-v9" in message and "\n" not in message
    assert (tmp_path / "logs" / "bad.log").exists()


def test_a_run_killed_from_outside_is_run_again_and_says_so(tmp_path, monkeypatch):
    codes = [-15, 0]

    def once(self, args, home, out, log, seraph, name):
        log.write_text("")
        code = codes.pop(0)
        if code == 0:
            out.write_text(json.dumps(_static(0, 1.0, 2.0)))
        return code

    monkeypatch.setattr(sh.Cli, "_once", once)
    result = sh.Cli(tmp_path).run(["rl", "train"], tmp_path / "home", "killed", seraph=False)
    assert result["killed_and_rerun"] == 1 and sh.train_record(result, 0)["killed_and_rerun"] == 1
    codes[:] = [-15] * (sh.SIGNAL_RETRIES + 1)
    with pytest.raises(CliFailed, match="exit -15"):
        sh.Cli(tmp_path).run(["rl", "train"], tmp_path / "home", "killed", seraph=False)


DATA = __import__("pathlib").Path(__file__).parent / "data"


def test_a_recorded_rl_tune_json_is_read_as_the_cli_wrote_it():
    recorded = json.loads((DATA / "rl_tune_acrobot_seed1_trimmed.json").read_text())
    row = tune_record(recorded, seed=1, k=2)
    assert row["cost_usd"] == recorded["achieved"]["cost_usd"] and row["env_steps"] == 72000 and row["reached"]
    assert sh.shape_text(row["config"]) == "2x1769x4000" and row["arm"] is None  # this CLI had no history yet
    assert row["phase_configs"] == [{"actors": 2, "memory_mb": 1769, "batch": 4000}]  # the pilot phase names no shape


def test_a_recorded_series_rescores_to_its_own_summary_and_to_the_sums_of_its_runs(capsys):
    path = DATA / "seraph_history_acrobot_seeds_0_2.json"
    saved = json.loads(path.read_text())
    res = saved["envs"][0]
    again = summarise(res)
    assert json.loads(json.dumps(again)) == res["summary"]  # --rescore reproduces what the run printed
    tune, static = res["series"]["cost"], res["static"]
    cumulative = again["series"]["cost"]["per_run"][-1]["cumulative_cost_ratio"]
    assert cumulative == pytest.approx(sum(r["cost_usd"] for r in tune) / sum(r["cost_usd"] for r in static))
    assert again["control"]["env_steps_equal"]  # the same trajectory twice: only the clock differs
    assert sh.main(["--rescore", str(path)]) == 0
    assert "cumulative bill ratio, worst k" in capsys.readouterr().out
