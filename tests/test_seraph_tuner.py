"""The tuner end to end on a hand-made cached profile (no pilot), and the CLI's input errors."""

import json

import pytest

from optimizers.seraph.models import Observation, RunShape
from optimizers.seraph.profiles import Profile, save_profile
from optimizers.seraph.profiling import pilot_schedule, workload_for
from trainwise.cli import main
from trainwise.paths import hardware_fingerprint


def _synthetic_profile(workload):
    """Rows shaped like a real pilot's: 30 us per env step at >= 1769 MB, slower below."""
    obs = []
    for s in pilot_schedule(int(workload.ppo["minibatch_size"])):
        k = 30e-6 * max(1.0, 1769 / s.memory_mb)
        roll = 0.02 + k * s.batch / s.actors
        learner = 0.35e-3 * s.batch
        obs.append(Observation(s, roll, roll - 0.01, learner, roll + learner + 0.01))
    return Profile(
        workload=workload.key_dict(),
        backend="local",
        hardware=hardware_fingerprint(),
        observations=obs,
        noise={"b_noise": 50.0, "history": []},
        pilot={"env_steps": 10000, "cost_usd": 2e-4, "lambda_time_s": 6.0, "wall_s": 6.0, "iterations": 16},
        memory_sweep=[512, 885, 1769, 3008, 5307, 10240],
    )


@pytest.fixture
def home(tmp_path, monkeypatch):
    monkeypatch.setenv("TRAINWISE_HOME", str(tmp_path / "home"))
    monkeypatch.setenv("TRAINWISE_RUNS", str(tmp_path / "runs"))
    return tmp_path


def _cli(args, capsys):
    rc = main(["rl", "tune", *args])
    return rc, capsys.readouterr()


def test_plan_only_uses_cached_profile_and_writes_plan_and_png(home, capsys):
    save_profile(_synthetic_profile(workload_for("CartPole-v1", None)))
    out = home / "plan.json"
    rc, cap = _cli(
        ["--env", "CartPole-v1", "--target-reward", "475", "--objective", "cost", "--plan-only",
         "--backend", "local", "--json-out", str(out)],
        capsys,
    )
    assert rc == 0, cap.err
    d = json.loads(out.read_text())
    assert d["profile"]["reused"] is True
    plan = d["plan"]
    assert plan["feasible"] and plan["config"]["memory_mb"] in plan["search_space"]["memory_mb"]
    assert plan["pareto_front"] and plan["predicted"]["cost_usd"] > 0
    # the plan is the cheapest of the scored candidates
    assert plan["predicted"]["cost_usd"] == pytest.approx(plan["cheapest"]["predicted_cost_usd"])
    assert (home / "plan.pareto.png").stat().st_size > 0
    assert "achieved" not in d


def test_speed_plan_is_no_slower_than_cost_plan(home):
    from optimizers.seraph import tune_and_train

    save_profile(_synthetic_profile(workload_for("CartPole-v1", None)))
    cost = tune_and_train(env_id="CartPole-v1", target_reward=475, objective="cost", plan_only=True)["plan"]
    speed = tune_and_train(env_id="CartPole-v1", target_reward=475, objective="speed", plan_only=True)["plan"]
    assert speed["predicted"]["time_s"] <= cost["predicted"]["time_s"]
    assert cost["predicted"]["cost_usd"] <= speed["predicted"]["cost_usd"]


def test_infeasible_deadline_is_explained(home, capsys):
    save_profile(_synthetic_profile(workload_for("CartPole-v1", None)))
    out = home / "plan.json"
    rc, cap = _cli(
        ["--env", "CartPole-v1", "--target-reward", "475", "--objective", "cost", "--deadline-s", "0.5",
         "--plan-only", "--json-out", str(out)],
        capsys,
    )
    assert rc == 0
    plan = json.loads(out.read_text())["plan"]
    assert plan["feasible"] is False and plan["binding"] == ["deadline_s"]
    assert "fastest plan needs" in plan["message"]
    # without --plan-only an infeasible plan is refused before training, with the same message
    rc, cap = _cli(
        ["--env", "CartPole-v1", "--target-reward", "475", "--objective", "cost", "--deadline-s", "0.5",
         "--json-out", str(home / "x.json")],
        capsys,
    )
    assert rc == 2 and "deadline" in cap.err and "Traceback" not in cap.err
    assert not (home / "x.json").exists()


def test_short_training_run_reports_phases_and_model_check(home):
    from optimizers.seraph import tune_and_train

    workload = workload_for("CartPole-v1", 3000)
    save_profile(_synthetic_profile(workload))
    res = tune_and_train(env_id="CartPole-v1", target_reward=475, objective="cost", max_steps=3000, replan_every=1)
    a = res["achieved"]
    assert a["reached"] is False and a["env_steps"] == 3000  # 3k steps are too few for 475
    assert a["cost_usd"] > 0 and a["lambda_time_s"] > 0
    assert res["phases"] and sum(p["env_steps"] for p in res["phases"]) == 3000
    for p in res["phases"]:
        assert p["predicted_time_s"] > 0 and p["measured_time_s"] > 0
    assert res["model_check"]["iterations_checked"] >= 1
    assert all(d["reason"] for d in res["decisions"])


@pytest.mark.parametrize(
    "extra, needle",
    [
        (["--objective", "cheapest"], "cost, speed, balanced"),
        (["--objective", "balanced", "--weight", "2"], "weight"),
        (["--objective", "cost", "--backend", "aws"], "local, ray"),
        (["--objective", "cost", "--budget-usd", "-1"], "budget"),
    ],
)
def test_bad_input_fails_cleanly(home, capsys, extra, needle):
    rc, cap = _cli(["--env", "CartPole-v1", "--target-reward", "475", *extra, "--json-out", str(home / "o.json")], capsys)
    assert rc == 2
    assert needle in cap.err and "Traceback" not in cap.err
    assert not (home / "o.json").exists()


def test_unknown_env_fails_cleanly(home, capsys):
    rc, cap = _cli(["--env", "CartPool-v1", "--target-reward", "475", "--objective", "cost"], capsys)
    assert rc == 2 and "CartPole-v1" in cap.err
