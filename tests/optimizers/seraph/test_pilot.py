"""The pilot's schedule and batch, and the learner timing that replaces its batch sweep."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from optimizers.seraph.models import Observation, PerformanceModel
from serverless.run_shape import RunShape
from optimizers.seraph.pilot import (
    BASE_MEMORY_MB,
    batches_for,
    beside_rollouts,
    pilot_batch,
    pilot_schedule,
    time_learner_updates,
    workload_for,
)


def test_the_pilot_sweeps_the_function_count_at_one_batch() -> None:
    shapes = pilot_schedule(1024)
    assert {s.batch for s in shapes} == {1024} and {s.memory_mb for s in shapes} == {BASE_MEMORY_MB}
    assert [s.actors for s in shapes] == [16, 16, 8, 4, 2, 1]
    # a small batch caps the count: every function runs at least 32 steps
    # the first count is visited twice (cold, then warm), every later one once (already warm)
    assert [s.actors for s in pilot_schedule(128)] == [4, 4, 2, 1]
    # with env slots every function keeps a slot: at most batch // steps_per_env functions
    assert [s.actors for s in pilot_schedule(1024, 128)] == [8, 8, 4, 2, 1]
    assert [s.actors for s in pilot_schedule(16384, 128)] == [16, 16, 8, 4, 2, 1]
    assert [s.actors for s in pilot_schedule(4000, 2000)] == [2, 2, 1]  # the static default layout
    # at the baseline's layout the pilot does not go below the baseline's count: its own iterations
    assert [s.actors for s in pilot_schedule(4000, 2000, min_actors=2)] == [2, 2, 2]
    assert [s.actors for s in pilot_schedule(1024, 128, min_actors=4)] == [8, 8, 4]


def test_the_pilot_batch_is_the_reference_batch_with_the_fewest_steps(monkeypatch: pytest.MonkeyPatch) -> None:
    workload = workload_for("CartPole-v1", None)
    refs = {"CartPole-v1": {"points": [[512, 30000.0], [1024, 19000.0], [2048, 51000.0]]}}
    monkeypatch.setattr("optimizers.seraph.references.load_references", lambda *a, **k: refs)
    assert pilot_batch(workload) == 1024
    # with runs: the largest batch the rank-sum test cannot tell from the fewest-steps one
    runs = [{"batch": b, "env_steps": e} for b, es in (
        (512, (20_000, 21_000, 22_000, 23_000, 30_000)),
        (1024, (19_000, 24_000, 26_000, 28_000, 31_000)),  # median higher, but inside 512's spread
        (2048, (50_000, 52_000, 55_000, 58_000, 60_000)),  # clearly more
    ) for e in es]
    alike = {"CartPole-v1": {"points": [[512, 22000.0], [1024, 26000.0], [2048, 55000.0]], "runs": runs}}
    monkeypatch.setattr("optimizers.seraph.references.load_references", lambda *a, **k: alike)
    assert pilot_batch(workload) == 1024
    apart = {"CartPole-v1": {**alike["CartPole-v1"], "runs": [r for r in runs if r["batch"] != 1024] + [
        {"batch": 1024, "env_steps": e} for e in (40_000, 41_000, 42_000, 43_000, 44_000)]}}
    monkeypatch.setattr("optimizers.seraph.references.load_references", lambda *a, **k: apart)
    assert pilot_batch(workload) == 512
    # no references for the env: the preset's batch if the search has it, else the smallest
    monkeypatch.setattr("optimizers.seraph.references.load_references", lambda *a, **k: {})
    preset_batch = 4096  # LunarLander-v3's preset; its search set starts at 2,048
    lunar = workload_for("LunarLander-v3", None)
    assert pilot_batch(lunar) == (preset_batch if preset_batch in batches_for(lunar) else min(batches_for(lunar)))
    assert pilot_batch(workload) == min(batches_for(workload))  # CartPole's preset 256 is not searched


def test_learner_timing_gives_one_row_per_batch() -> None:
    workload = workload_for("CartPole-v1", None)
    rows = time_learner_updates(workload, (512, 1024), seed=0, modelled=True)
    assert [r["batch"] for r in rows] == [512, 1024]
    assert all(r["learner_s"] > 0 and r["learner_cpu_s"] > 0 for r in rows)


def test_learner_rows_inform_the_learner_fit_only() -> None:
    pilot = []
    for s in pilot_schedule(1024):  # one batch: the learner's slope is not identifiable from these
        roll = 0.02 + 30e-6 * s.batch / s.actors
        pilot.append(Observation(s, roll, roll - 0.01, 0.5, roll + 0.5 + 0.004))
    timed = [
        Observation(RunShape(1, BASE_MEMORY_MB, b), 0.0, 0.0, 0.01 + 2e-4 * b, 0.01 + 2e-4 * b, learner_only=True)
        for b in (512, 1024, 2048, 4000)
    ]
    with_timing = PerformanceModel.fit([*pilot, *timed])
    alone = PerformanceModel.fit(pilot)
    # the shape from the timing, the level from training: 0.5 s at the pilot's batch
    l0, l1 = with_timing.learner_coef
    assert l0 + l1 * 1024 == pytest.approx(0.5)
    assert l1 / l0 == pytest.approx(2e-4 / 0.01)
    # the rollout and overhead fits see the pilot's rows only
    assert with_timing.rollout_coef == pytest.approx(alone.rollout_coef)
    assert with_timing.other_coef == pytest.approx(alone.other_coef, abs=1e-3)


def test_learner_work_beside_the_rollouts_adds_only_what_does_not_fit() -> None:
    # the longest job goes first, into the wait with the most room: 0.3 into 0.4 (0.1 left),
    # 0.2 fits nowhere, 0.05 into one of the two 0.1 gaps
    assert beside_rollouts([0.05, 0.3, 0.2], [0.1, 0.4]) == pytest.approx(0.2)
    assert beside_rollouts([0.05, 0.05], [0.1]) == pytest.approx(0.0)
    assert beside_rollouts([0.1, 0.2], []) == pytest.approx(0.3)  # a measured backend: no waits to use
    assert beside_rollouts([], [0.5]) == 0.0
    with pytest.raises(ValueError, match="at least 0"):
        beside_rollouts([-0.1], [0.5])


@pytest.mark.slow
def test_a_fresh_run_is_charged_the_whole_tuning_bill(tmp_path, monkeypatch) -> None:
    """Achieved time and cost = the run's ledger (the pilot's training included: the run
    resumes from it) + the memory probe and the learner timing + planning."""
    from optimizers.seraph import SeraphJob, SeraphRequest, tune_and_train

    monkeypatch.setenv("TRAINWISE_HOME", str(tmp_path / "home"))
    res = tune_and_train(
        # speed: the cost objective may stop the probe at one vCPU (test_the_cost_objective_...)
        SeraphJob.of(SeraphRequest("CartPole-v1", 475, objective="speed", max_steps=8192)), reprofile=True, run_dir=tmp_path / "run",
    ).to_dict()
    a, ov, pilot = res["achieved"], res["tuning_overhead"], res["profile"]["pilot"]
    assert a["includes_pilot"] and a["env_steps"] == 8192
    untrained_usd = ov["profiling_cost_usd"] - ov["pilot_training_cost_usd"]
    assert pilot["memory_probe"]["cost_usd"] > 0
    assert untrained_usd == pytest.approx(pilot["memory_probe"]["cost_usd"] + pilot["learner_timing"]["cost_usd"])
    assert a["cost_usd"] == pytest.approx(res["training"]["ledger"]["total_usd"] + untrained_usd + ov["planning_cost_usd"])
    timing = pilot["learner_timing"]
    assert timing["lambda_time_s"] + timing["beside_rollouts_s"] == pytest.approx(timing["timed_s"])
    assert timing["threads_speedup"]["1"] == 1.0 and timing["threads_label"] and timing["threads_timed_s"] > 0
    assert "threads_speedup" in res["plan"]["learner"]
    untrained_s = pilot["memory_probe"]["lambda_time_s"] + timing["lambda_time_s"]
    assert pilot["lambda_time_s"] == pytest.approx(pilot["training_lambda_time_s"] + untrained_s)
    # the run's clock, the pilot's part and the controller's work included: the learner VM's time
    run_s = 3600 * next(line["quantity"] for line in res["training"]["ledger"]["lines"] if line["component"] == "learner_vm")
    assert res["training"]["controller_s"] > 0
    assert a["lambda_time_s"] == pytest.approx(run_s + untrained_s + ov["planning_cpu_s"])


def test_the_gradient_noise_is_probed_only_when_the_search_has_batches_to_choose_between() -> None:
    from optimizers.seraph.pilot import noise_probe_every

    assert noise_probe_every(workload_for("CartPole-v1", None), 2) == 2
    assert noise_probe_every(workload_for("LunarLander-v3", None, steps_per_env=2000, batches=(4000,)), 2) == 0


def _pilot_result(cpu_share: float) -> SimpleNamespace:
    first = SimpleNamespace(rollout={"handler_cpu_share_best": cpu_share}, iteration_lambda_s=0.5, lambda_s_label="modelled")
    return SimpleNamespace(iterations=[first, SimpleNamespace()], lambda_time_s=1.25)


class _NoCalls:
    name = "no-calls"

    def invoke(self, events, memory_mb, concurrency=None):
        raise AssertionError(f"the probe invoked a function at {memory_mb} MB")


def test_the_cost_objective_stops_the_probe_at_one_vcpu_for_a_cpu_bound_rollout() -> None:
    """A pilot whose first rollouts kept one CPU busy: the cost objective probes nothing more
    (its baseline is at one vCPU), the plan may use one vCPU only, and nothing is charged."""
    from optimizers.seraph.pilot import _probe_beside_pilot

    workload = workload_for("CartPole-v1", None, steps_per_env=128)
    spec = SimpleNamespace(ppo=SimpleNamespace(hidden=(64, 64)), seed=0)
    out = _probe_beside_pilot(workload, _NoCalls(), spec, _pilot_result(0.97), (512, 1769, 3008), cost_baseline_mb=1769)
    assert out.cut and out.sizes == [BASE_MEMORY_MB]
    assert out.probe["rows"] == [] and out.probe["function_cost_usd"] == 0.0
    assert out.probe["skipped_sizes"] == [512, 3008] and "CPU-bound" in out.probe["skipped_reason"]
    assert out.beside_s == pytest.approx(0.75)  # the rest of the pilot, after the first iteration decided it


def test_a_rollout_that_waits_gets_the_whole_sweep_even_for_the_cost_objective() -> None:
    from optimizers.seraph.pilot import _probe_beside_pilot
    from tests.optimizers.seraph.test_memory_probe import ScriptedBackend

    workload = workload_for("CartPole-v1", None, steps_per_env=128)
    spec = SimpleNamespace(ppo=SimpleNamespace(hidden=(64, 64)), seed=0)
    backend = ScriptedBackend()
    out = _probe_beside_pilot(workload, backend, spec, _pilot_result(0.4), (512, 1769, 3008), cost_baseline_mb=1769)
    assert not out.cut and out.sizes == [512, 1769, 3008]
    assert {m for m, _ in backend.calls} == {512, 1769, 3008}
    assert out.beside_s == pytest.approx(1.25)  # started with the pilot


def test_a_cut_profile_serves_only_cost_runs_whose_baseline_size_it_covers() -> None:
    from optimizers.seraph.workload_profile import PilotSummary, Profile, ProfileNoise
    from optimizers.seraph.pilot import PilotPlan, serves

    sweep = (512, 1769, 3008)
    workload = workload_for("CartPole-v1", None, steps_per_env=128)
    cut = Profile(workload={}, backend="local", hardware="h", observations=[], noise=ProfileNoise(),
                  pilot=PilotSummary(memory_probe={"requested_sweep": list(sweep)}), memory_sweep=[1769])
    full = Profile(workload={}, backend="local", hardware="h", observations=[], noise=ProfileNoise(), pilot=PilotSummary(), memory_sweep=list(sweep))
    assert serves(cut, PilotPlan(sweep, cost_stop_mb=1769), workload)
    assert not serves(cut, PilotPlan(sweep), workload)  # speed or balance: needs every size
    assert not serves(cut, PilotPlan(sweep, cost_stop_mb=3008), workload)  # the baseline's size was not probed
    assert serves(full, PilotPlan(sweep), workload) and serves(full, PilotPlan(sweep, cost_stop_mb=1769), workload)
    assert not serves(full, PilotPlan((512, 1769)), workload)  # another sweep


def test_a_cost_pilot_starts_few_cold_functions_and_its_profile_serves_no_speed_run() -> None:
    from dataclasses import replace

    from optimizers.seraph.workload_profile import PilotSummary, Profile, ProfileNoise
    from optimizers.seraph.pilot import COST_PILOT_TOP_ACTORS, PilotPlan, serves

    workload = workload_for("LunarLander-v3", None, steps_per_env=128)  # batches of 2,048 and up: room for 16
    cost = PilotPlan(cost_stop_mb=1769, top_actors=COST_PILOT_TOP_ACTORS)
    speed = PilotPlan()
    assert [s.actors for s in cost.schedule(workload)] == [2, 2, 1]
    assert max(s.actors for s in speed.schedule(workload)) == 16
    assert [s.actors for s in PilotPlan(min_actors=8, top_actors=2).schedule(workload)] == [8, 8, 8]  # the floor wins

    def profile_of(plan: PilotPlan) -> Profile:
        return Profile(workload={}, backend="local", hardware="h", observations=[], noise=ProfileNoise(),
                       pilot=PilotSummary(schedule=tuple(plan.schedule(workload))), memory_sweep=list(plan.memory_sweep))

    assert not serves(profile_of(cost), speed, workload)  # a speed plan needs the wide points measured
    assert serves(profile_of(speed), cost, workload)  # a wider pilot serves a cost plan
    assert serves(profile_of(cost), replace(cost, cost_stop_mb=None), workload)  # same top, full sweep




def test_the_thread_timing_measures_each_count_against_one_thread() -> None:
    """Behaviour only (no timing threshold): every count has a positive speed-up, one thread is
    1.0, the label says measured wall time and the host's load, and torch's threads are restored."""
    import torch

    from optimizers.seraph.learner_threads import measure_thread_scaling

    before = torch.get_num_threads()
    timing = measure_thread_scaling(workload_for("CartPole-v1", None), 512, repeats=1, counts=(2,))
    speedups = dict(timing.scaling.speedups)
    assert set(speedups) == {1, 2} and speedups[1] == 1.0 and speedups[2] > 0
    assert timing.scaling.label.startswith("measured, wall, host load") and timing.vm_s > 0
    assert torch.get_num_threads() == before
    alone = measure_thread_scaling(workload_for("CartPole-v1", None), 512, counts=())
    assert alone.scaling.speedups == ((1, 1.0),) and alone.vm_s == 0.0


def test_the_cost_plan_does_not_plan_more_functions_than_its_pilot_visited() -> None:
    from optimizers.seraph import SeraphJob, SeraphRequest
    from optimizers.seraph.workload_profile import PilotSummary, Profile, ProfileNoise

    def profile(top: int) -> Profile:
        schedule = tuple(RunShape(a, BASE_MEMORY_MB, 1024) for a in (top, top, 1))
        return Profile(workload={}, backend="local", hardware="h", observations=[], noise=ProfileNoise(),
                       pilot=PilotSummary(schedule=schedule), memory_sweep=[BASE_MEMORY_MB])

    cost = SeraphJob.of(SeraphRequest("CartPole-v1", 475, objective="cost"))
    speed = SeraphJob.of(SeraphRequest("CartPole-v1", 475, objective="speed"))
    assert max(cost.search_space(profile(2)).actors) == 2
    assert max(cost.search_space(profile(16)).actors) == 16  # a wider profile serves it: measured up to 16
    assert max(speed.search_space(profile(2)).actors) == 256  # speed extrapolates up: wide layouts pay in time
