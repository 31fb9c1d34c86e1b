"""The tuner end to end on a hand-made cached profile (no pilot), and the CLI's input errors."""

import json

import numpy as np
import pytest

from optimizers.seraph.models import Observation
from serverless.run_shape import RunShape
from optimizers.seraph.workload_profile import PilotSummary, Profile, ProfileNoise, save_profile
from optimizers.seraph.pilot import batches_for, pilot_batch, pilot_schedule, workload_for
from optimizers.seraph.search import TIE_TOLERANCE
from trainwise.cli import main
from core.paths import hardware_fingerprint


def _synthetic_profile(workload):
    """Rows shaped like a real pilot's: 30 us per env step at >= 1769 MB, slower below."""
    obs = []
    for s in pilot_schedule(pilot_batch(workload)):
        k = 30e-6 * max(1.0, 1769 / s.memory_mb)
        roll = 0.02 + k * s.batch / s.actors
        learner = 0.35e-3 * s.batch
        obs.append(Observation(s, roll, roll - 0.01, learner, roll + learner + 0.01))
    for b in batches_for(workload):  # the learner timing's rows: the update alone at each batch
        obs.append(Observation(RunShape(1, 1769, b), 0.0, 0.0, 0.35e-3 * b, 0.35e-3 * b, learner_only=True))
    for m in (512, 885, 3008, 5307, 10240):  # the memory probe's rows: one rollout each, no learner
        roll = 0.02 + 30e-6 * max(1.0, 1769 / m) * 256
        obs.append(Observation(RunShape(1, m, 256), roll, roll - 0.01, 0.0, roll, rollout_only=True))
    return Profile(
        workload=workload.key_dict(),
        backend="local",
        hardware=hardware_fingerprint(),
        observations=obs,
        noise=ProfileNoise(b_noise=50.0),
        pilot=PilotSummary(env_steps=10000, cost_usd=2e-4, lambda_time_s=6.0, wall_s=6.0, iterations=16),
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
    # the plan is the cheapest of the scored candidates, or a faster one within the tie
    # tolerance of it (optimizers.seraph.search.TIE_TOLERANCE)
    cheapest = plan["cheapest"]["predicted_cost_usd"]
    assert cheapest * (1 - 1e-9) <= plan["predicted"]["cost_usd"] <= cheapest * (1 + TIE_TOLERANCE)
    assert (home / "plan.pareto.png").stat().st_size > 0
    assert "achieved" not in d


def test_speed_plan_is_no_slower_than_cost_plan(home):
    from optimizers.seraph import SeraphJob, SeraphRequest, tune_and_train

    save_profile(_synthetic_profile(workload_for("CartPole-v1", None)))
    cost = tune_and_train(SeraphJob.of(SeraphRequest("CartPole-v1", 475, objective="cost")), plan_only=True).to_dict()["plan"]
    speed = tune_and_train(SeraphJob.of(SeraphRequest("CartPole-v1", 475, objective="speed")), plan_only=True).to_dict()["plan"]
    assert speed["predicted"]["time_s"] <= cost["predicted"]["time_s"]
    assert cost["predicted"]["cost_usd"] <= speed["predicted"]["cost_usd"]


@pytest.mark.slow
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


@pytest.mark.slow
def test_short_training_run_reports_phases_and_model_check(home):
    from optimizers.seraph import SeraphJob, SeraphRequest, tune_and_train

    workload = workload_for("CartPole-v1", 3000)
    save_profile(_synthetic_profile(workload))
    result = tune_and_train(SeraphJob.of(SeraphRequest("CartPole-v1", 475, objective="cost", max_steps=3000, replan_every=1)))
    res = result.to_dict()
    assert json.loads(json.dumps(res)) == res  # the result's JSON is plain JSON
    assert list(res) == ["label", "workload", "plan", "profile", "tuning_overhead", "achieved", "phases",
                         "model_check", "decisions", "layout_decisions", "training"]
    assert res["phases"][0]["config"] == res["plan"]["config"]  # training starts at the planned shape
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
        (["--objective", "cost", "--inject-faults", "errors=2"], "--inject-faults: errors must be a rate in [0, 1)"),
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


def _planner(objective="cost", constraints=None):
    """A planner for CartPole at 475 fitted to the synthetic profile of the default slots."""
    from dataclasses import replace

    from optimizers.seraph.job import SeraphJob
    from optimizers.seraph.pilot import PilotOutcome
    from optimizers.seraph.request import SeraphRequest
    from optimizers.seraph.search import Constraints
    from optimizers.seraph.steps import make_planner

    c = constraints or Constraints()
    job = SeraphJob.of(SeraphRequest("CartPole-v1", 475, objective=objective, deadline_s=c.deadline_s, budget_usd=c.budget_usd))
    workload = workload_for("CartPole-v1", None)
    return make_planner(PilotOutcome(_synthetic_profile(workload), reused=True), replace(job, workload=workload))


def _record(iteration, env_steps, shape, cost, ret=None, grad_noise=None):
    from types import SimpleNamespace

    return SimpleNamespace(
        iteration=iteration, env_steps=env_steps, run=SimpleNamespace(**shape.to_dict()), wall_s=0.3, lambda_s=0.05,
        lambda_s_label="modelled", learner_s=0.2, learner_cpu_s=0.2, iteration_lambda_s=0.27, rollout={"measured_wall_s": 0.08, "invocations": shape.actors, "billed_ms_total": 30 * shape.actors,
        "cold_starts": 0}, cost_usd=cost, mean_return=ret, grad_noise=grad_noise,
    )


def test_replan_under_a_spent_deadline_heads_for_the_fastest_shape():
    from optimizers.seraph.search import Constraints

    planner = _planner("cost", Constraints(deadline_s=1.0))
    current = RunShape(1, 1769, 512)
    for i in range(3):
        planner.observe(_record(i, 512 * (i + 1), current, 1e-5 * (i + 1)))
    assert planner.spent_s > 0 and len(planner.predictions) == 3
    outcome, now, score = planner.replan(current)
    assert not outcome.feasible and "deadline_s" in outcome.binding
    assert outcome.best == outcome.fastest  # salvage: the best achievable time
    assert score(current).shape == current


def test_remaining_fraction_falls_back_to_the_reward_gap():
    planner = _planner()
    progress = planner.progress_model()
    planner.env_steps = int(progress.env_steps(512) * 2)  # spent twice the estimate
    planner.first_return, planner.last_return = 20.0, 400.0
    assert planner.remaining_fraction(progress, 512) == pytest.approx((475 - 400) / (475 - 20))
    planner.env_steps = 0
    assert planner.remaining_fraction(progress, 512) == pytest.approx(1.0)


def test_live_noise_growth_scales_the_fitted_noise_level():
    planner = _planner()
    base = planner.b_noise  # fitted to CartPole's reference points; growth 1 before live probes
    assert planner.noise_growth() == 1.0
    # B_simple of these probes is ~76, above the profile's 50: growth ~1.5
    noise = {"b_small": 64, "small_sqnorms": [2.0, 2.2, 1.8], "b_big": 512, "big_sqnorm": 1.05}
    for i in range(3):
        planner.observe(_record(i, 512 * (i + 1), RunShape(1, 1769, 512), 1e-5, grad_noise=noise))
    assert planner.tracker.count == 3
    assert planner.noise_growth() == pytest.approx(1.52, rel=0.05)
    assert planner.b_noise == pytest.approx(base * planner.noise_growth())


def test_fit_progress_recovers_known_curve():
    from optimizers.seraph.stats import fit_progress

    pts = [(b, 10_000 * (1 + b / 800)) for b in (256, 1024, 4096)]
    e_min, bn = fit_progress(pts)
    assert e_min == pytest.approx(10_000, rel=0.03) and bn == pytest.approx(800, rel=0.03)


def test_progress_model_passes_through_measured_points_and_keeps_the_curve_between():
    from optimizers.seraph.models import ProgressModel
    from optimizers.seraph.stats import fit_progress

    # flat from 512 to 1,024, then steeper than the curve: a shape no smooth fit follows
    pts = [(512, 21_000.0), (1024, 19_000.0), (2048, 51_000.0), (4000, 90_000.0)]
    e_min, bn = fit_progress(pts)
    model = ProgressModel.through_points(bn, e_min, pts)
    for b, e in pts:
        assert model.env_steps(b) == pytest.approx(e)
    between = model.env_steps(1448)  # ~ the log-midpoint of 1,024 and 2,048
    assert 19_000 < between < 51_000
    # beyond the ends the measured ratio is held and the curve carries on
    curve = ProgressModel(bn, e_min)
    assert model.env_steps(8000) / curve.env_steps(8000) == pytest.approx(90_000 / curve.env_steps(4000))
    assert model.updates(1024) == pytest.approx(19_000 / 1024)
    # the rest of training scales the whole curve; a grown noise scale lowers large batches more than small
    assert model.scaled(0.5).env_steps(2048) == pytest.approx(25_500)
    grown = ProgressModel(2 * bn, e_min, model.residual)
    assert grown.env_steps(4000) / model.env_steps(4000) < grown.env_steps(512) / model.env_steps(512) <= 1.0


def test_planner_ranks_batches_by_the_measured_points():
    planner = _planner()
    progress = planner.progress_model()
    ref = dict(planner._lagged_points(points=planner.progress_points))
    for b, e in ref.items():
        assert progress.env_steps(b) == pytest.approx(e)


def test_batches_whose_runs_cannot_be_told_apart_share_one_steps_figure():
    from optimizers.seraph.reference_points import Reference
    from optimizers.seraph.stats import tie_pooled_points

    def reference(runs_512, runs_1024):
        runs = tuple((4, 512, e) for e in runs_512) + tuple((4, 1024, e) for e in runs_1024) + ((4, 2048, 60e3),) * 3
        med = lambda xs: float(np.median(xs))  # noqa: E731
        return Reference(points=((512, med(runs_512)), (1024, med(runs_1024)), (2048, 60e3)), source="test", runs=runs)

    # overlapping runs: 512 looks 20% better by its median, the rank-sum test cannot tell
    tied = reference([20e3, 24e3, 30e3, 22e3, 35e3], [25e3, 21e3, 33e3, 29e3, 36e3])
    pooled = dict(tie_pooled_points(tied, (512, 1024, 2048)))
    assert pooled[512] == pooled[1024] == float(np.median([20e3, 24e3, 30e3, 22e3, 35e3, 25e3, 21e3, 33e3, 29e3, 36e3]))
    assert pooled[2048] == 60e3
    # a batch outside the search is not pooled, and clearly different runs are not either
    assert dict(tie_pooled_points(tied, (512, 2048)))[1024] == 29e3
    apart = reference([20e3, 21e3, 22e3, 23e3, 24e3], [40e3, 41e3, 42e3, 43e3, 44e3])
    assert tie_pooled_points(apart, (512, 1024, 2048)) == apart.points


def _actor_planner(runs_4, steps_per_env=0):
    from optimizers.seraph.objectives import Cost
    from optimizers.seraph.planner import Planner
    from optimizers.seraph.reference_points import Reference
    from optimizers.seraph.search import Constraints
    from optimizers.seraph.job import prices_for

    workload = workload_for("CartPole-v1", None, steps_per_env=steps_per_env)
    base_runs = [(1, b, e) for b in (512, 1024) for e in (19_500, 20_000, 20_500, 21_000, 21_500, 20_250, 20_750, 20_500)]
    # 1 actor: 20,500 steps at both batches; 4 actors: 18,000 (net of the 500-step-per-actor lag: 0.8x)
    ref = Reference(
        points=((512, 20_500.0), (1024, 20_500.0)), source="test", actors=1,
        by_actors=((4, ((512, 18_000.0), (1024, 18_000.0), (4000, 99_000.0))),),  # 4,000: no 1-actor point, ignored
        runs=tuple(base_runs + [(4, b, e) for b in (512, 1024) for e in runs_4]),
    )
    return Planner(
        profile=_synthetic_profile(workload), objective=Cost(), constraints=Constraints(),
        prices=prices_for("x86_64"), reference=ref, episode_steps=500,
    )


def test_a_significant_actor_effect_is_used_and_interpolated():
    planner = _actor_planner((17_000, 17_500, 18_000, 18_000, 18_500, 17_800, 18_200, 18_000))  # all below 1 actor's
    assert planner.actor_factors() == [(1, 1.0), (4, pytest.approx(0.8))]
    assert planner.actor_factor_tests[4]["p_value"] < 0.001
    assert planner.actor_factor(2) == pytest.approx(0.9)  # halfway in log2(actors)
    assert planner.actor_factor(16) == pytest.approx(0.8)  # flat beyond the largest measured count
    progress = planner.progress_model()
    assert planner.env_steps_to_target(progress, RunShape(4, 1769, 512)) == pytest.approx(18_000)
    assert planner.env_steps_to_target(progress, RunShape(1, 1769, 512)) == pytest.approx(20_500)
    assert planner.plan().as_dict()["progress_model"]["noise"]["actor_factors"] == [[1, 1.0], [4, pytest.approx(0.8)]]


def test_with_env_slots_the_actor_count_has_no_effect_on_steps():
    # the same measured effect as above, but the workload splits batches into env slots:
    # the actor count no longer changes what is learned, so the planner does not use it
    planner = _actor_planner((17_000, 17_500, 18_000, 18_000, 18_500, 17_800, 18_200, 18_000), steps_per_env=128)
    assert planner.actor_factors() == [(1, 1.0)]
    assert planner.actor_factor(4) == 1.0


def test_with_env_slots_the_detection_lag_is_one_episode_per_slot_whatever_the_actor_count():
    planner = _actor_planner((18_000,) * 8, steps_per_env=128)
    progress = planner.progress_model()
    # batch 1,024 in slots of 128: 8 episodes in flight for 1, 2, 4 or 8 functions
    steps = {a: planner.env_steps_to_target(progress, RunShape(a, 1769, 1024)) for a in (1, 2, 4, 8)}
    assert len(set(steps.values())) == 1
    assert planner.episodes_in_flight(4, 1024) == 8 and planner.episodes_in_flight(16, 1024) == 16
    # the reference (1 function) is net of the same 8 x 500 steps, and the lag is added back
    assert steps[1] == pytest.approx(20_500)
    # without slots each function has its own episode in flight
    plain = _actor_planner((9_000, 30_000, 14_000, 40_000, 18_000, 12_000, 26_000, 19_000))
    assert plain.episodes_in_flight(4, 1024) == 4


def test_the_default_workload_uses_env_slots_and_the_search_gives_each_function_a_slot():
    from optimizers.seraph.defaults import DEFAULT_STEPS_PER_ENV
    from optimizers.seraph.request import SeraphRequest
    from optimizers.seraph.job import SeraphJob, search_space_for

    workload = workload_for("CartPole-v1", None)
    assert workload.steps_per_env == DEFAULT_STEPS_PER_ENV == SeraphJob.of(SeraphRequest("CartPole-v1", 475)).workload.steps_per_env
    space = search_space_for(workload, (1769,))
    assert all(s.batch // s.actors >= DEFAULT_STEPS_PER_ENV for s in space.shapes())
    assert max(s.actors for s in space.shapes() if s.batch == 1024) == 8
    assert search_space_for(workload_for("CartPole-v1", None, steps_per_env=0), (1769,)).min_steps_per_actor == 32


def test_the_search_does_not_plan_fewer_functions_than_the_pilot_visited():
    from optimizers.seraph.job import search_space_for

    at_baseline = PilotSummary.from_dict({"schedule": [{"actors": 2, "memory_mb": 1769, "batch": 4000}] * 2})
    assert at_baseline.min_actors == 2
    assert PilotSummary.from_dict({}).min_actors == 1
    workload = workload_for("LunarLander-v3", None, steps_per_env=2000, batches=(4000,))
    assert {s.actors for s in search_space_for(workload, (1769,), min_actors=2).shapes()} == {2}
    assert {s.actors for s in search_space_for(workload, (1769,)).shapes()} == {1, 2}


def test_the_static_default_runs_one_env_per_actor_whatever_the_workload(monkeypatch):
    from optimizers.rl_baselines import static as rl_static

    seen = {}

    def fake_train_shape(workload, shape, **kw):
        seen["ppo"] = dict(workload.ppo)
        return {"reached": True}

    monkeypatch.setattr(rl_static, "train_shape", fake_train_shape)
    workload = workload_for("CartPole-v1", None)
    rl_static.run_static(workload, target_reward=475, seed=0)
    assert seen["ppo"]["steps_per_env"] == 0 and workload.steps_per_env > 0  # the caller's workload is untouched


def test_an_actor_effect_inside_the_seed_spread_is_not_used():
    planner = _actor_planner((9_000, 30_000, 14_000, 40_000, 18_000, 12_000, 26_000, 19_000))  # median 18,000, wide
    assert planner.actor_factors() == [(1, 1.0)]
    assert planner.actor_factor_tests[4]["p_value"] > 0.05
    assert planner.actor_factor(4) == 1.0


def test_rank_sum_p_matches_the_asymptotic_mann_whitney():
    from optimizers.seraph.stats import rank_sum_p

    a = [135168, 147456, 151552, 155648, 169984, 194560, 321536, 354304]
    b = [124928, 176128, 188416, 192512, 270336, 358400, 591872, 677888]
    assert rank_sum_p(b, a) == pytest.approx(0.18926, abs=1e-4)  # scipy.stats.mannwhitneyu(method="asymptotic")
    assert rank_sum_p(a, a) == pytest.approx(1.0)
    assert rank_sum_p([1, 2, 3, 4, 5, 6, 7, 8], [11, 12, 13, 14, 15, 16, 17, 18]) < 0.001


def test_prediction_error_is_the_median_over_recent_iterations():
    planner = _planner()
    assert planner.prediction_error() is None
    for i, (p, m) in enumerate([(1.0, 2.0), (1.0, 1.1), (1.0, 1.0), (1.2, 1.0)]):
        planner.predictions[i] = {"predicted_s": p, "predicted_cost_usd": 0.0, "measured_s": m}
    assert planner.prediction_error() == pytest.approx((1 / 11 + 0.2) / 2)  # errors 0.5, 0.091, 0, 0.2
    assert planner.prediction_error(last=2) is None


def test_an_iteration_that_replayed_slots_or_started_instances_is_not_steady_state():
    from optimizers.seraph.records import observation

    shape = RunShape(2, 1769, 1024)
    steady = _record(5, 5120, shape, 1e-4)
    assert observation(steady).cold is False
    steady.rollout["replayed_slots"] = 3  # envs rebuilt after a change of shape
    assert observation(steady).cold is True
    steady.rollout.update(replayed_slots=0, cold_starts=1)
    assert observation(steady).cold is True


@pytest.mark.slow
def test_a_tuned_run_under_injected_faults_reports_them_and_loses_nothing(home):
    """The request's fault spec (``--inject-faults``, ``rl.inject_faults``) reaches the backend
    the tuner builds; the result's ``training`` reports the faults and the rollout counters."""
    from optimizers.seraph import SeraphJob, SeraphRequest, tune_and_train

    workload = workload_for("CartPole-v1", 3000)
    save_profile(_synthetic_profile(workload))
    request = SeraphRequest.from_dict({"env_id": "CartPole-v1", "target_reward": 475, "objective": "cost", "max_steps": 3000,
                                        "faults": "errors=0.2,throttle=0.2,seed=3"})
    training = tune_and_train(SeraphJob.of(request)).to_dict()["training"]
    faults = training["faults"]
    assert faults["injected"]["errors"] > 0 and faults["injected"]["throttle"] > 0
    assert faults["recovered"]["errors"] == faults["injected"]["errors"]
    assert training["lost_rollouts"] == 0 and training["duplicate_rollouts"] == 0
    assert training["ledger"]["faults"]["usd"] > 0


def test_the_baseline_is_always_a_candidate_scored_at_its_own_layout():
    from optimizers.seraph.baseline import STATIC_DEFAULT_CONFIG
    from optimizers.seraph.job import SeraphJob
    from optimizers.seraph.layout import choose_layout
    from optimizers.seraph.pilot import PilotOutcome
    from optimizers.seraph.request import SeraphRequest
    from optimizers.seraph.steps import make_planner

    workload = workload_for("CartPole-v1", None)
    layout = choose_layout("CartPole-v1", STATIC_DEFAULT_CONFIG, workload.steps_per_env, batches_for(workload))
    job = SeraphJob.of(SeraphRequest("CartPole-v1", 475, objective="cost"))
    assert job.layout == layout and job.baseline == STATIC_DEFAULT_CONFIG
    planner = make_planner(PilotOutcome(_synthetic_profile(job.workload), reused=True), job)
    plan = planner.plan()
    base = [c for c in plan.candidates if c.shape == STATIC_DEFAULT_CONFIG.without_layout() and c.steps_per_env == 2000]
    assert len(base) == 1 and base[0].env_steps == layout.baseline_env_steps  # its own runs' median, not the slots'
    verdict = plan.as_dict()["baseline"]
    assert verdict["chosen"] == "search" and verdict["predicted_saving"] > verdict["model_error"]
    assert plan.steps_per_env == 128 and plan.as_dict()["layout"]["at_baseline"] is False


def test_an_env_without_references_plans_from_the_pilot_alone_at_the_baseline_layout(home, capsys):
    from optimizers.seraph.job import SeraphJob
    from optimizers.seraph.request import SeraphRequest

    workload = SeraphJob.of(SeraphRequest("Acrobot-v1", -100)).workload
    assert (workload.steps_per_env, workload.batches) == (2000, (4000,))
    save_profile(_synthetic_profile(workload))
    out = home / "plan.json"
    rc, cap = _cli(["--env", "Acrobot-v1", "--target-reward", "-100", "--objective", "cost", "--plan-only",
                    "--json-out", str(out)], capsys)
    assert rc == 0 and "references: none" in cap.err
    plan = json.loads(out.read_text())["plan"]
    assert plan["references"] == "none" and plan["steps_per_env"] == 2000
    assert plan["config"]["batch"] == 4000 and plan["baseline"]["chosen"] == "baseline"


def test_a_bad_baseline_config_flag_is_one_line_naming_it(home, capsys):
    rc, cap = _cli(["--env", "CartPole-v1", "--target-reward", "475", "--objective", "cost",
                    "--baseline-config", "actors=2,memory=1769,batch=4000,steps_per_env=4001"], capsys)
    assert rc == 2 and "--baseline-config: steps_per_env: must be 1 to batch / actors = 2000" in cap.err
    assert "Traceback" not in cap.err


def test_the_model_error_the_plan_holds_changes_to_is_capped(monkeypatch):
    """A leave-one-out error above the cap measures a pilot of too few shapes, not the model:
    the plan holds a change to the cap (the raw figure stays in the fit error)."""
    from optimizers.seraph.do_no_harm import MODEL_ERROR_CAP

    planner = _planner()
    monkeypatch.setitem(planner.profile_perf.fit_error, "iteration_s_mdape_leave_one_out", 1.06)
    assert planner.model_error() == MODEL_ERROR_CAP == 0.25
    monkeypatch.setitem(planner.profile_perf.fit_error, "iteration_s_mdape_leave_one_out", 0.07)
    assert planner.model_error() == 0.07
