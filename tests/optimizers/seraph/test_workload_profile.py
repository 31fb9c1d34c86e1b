"""Profiles are cached per workload, backend and hardware, and invalidated on change."""

import json

import pytest

from optimizers.seraph import workload_profile as profiles
from optimizers.seraph.models import Observation, PerformanceModel
from serverless.run_shape import RunShape
from optimizers.seraph.workload_profile import PilotSummary, Profile, ProfileNoise, load_profile, profile_path, save_profile

WORKLOAD = {"env_id": "CartPole-v1", "ppo": {"lr": 3e-4}, "architecture": "x86_64"}


def synthetic_observations(levels=((512, 1000.0), (1769, 3000.0)), batches=(1000, 2000)):
    """Training iterations of a known model: ``rate`` env steps a second per function at each
    memory size, 0.05 s overhead (+0.01 s with more than one function), learner 0.1 s + 1e-4 s a sample."""
    out = []
    for m, rate in levels:
        for a in (1, 2, 4):
            for b in batches:
                n = b / a
                roll = 0.05 + 0.01 * (a > 1) + n / rate
                out.append(Observation(RunShape(a, m, b), roll, n / rate + 0.02, 0.1 + b * 1e-4, roll + 0.1 + b * 1e-4 + 0.01))
    return out


def _profile(workload=WORKLOAD):
    return Profile(
        workload=workload,
        backend="local",
        hardware=profiles.hardware_fingerprint(),
        observations=synthetic_observations(),
        noise=ProfileNoise(b_noise=250.0),
        pilot=PilotSummary(env_steps=12000, cost_usd=0.001),
        memory_sweep=[512, 1769],
    )


def test_round_trip_and_reuse(tmp_path):
    p = _profile()
    save_profile(p, tmp_path)
    again = load_profile(WORKLOAD, "local", tmp_path)
    assert again is not None
    assert again.observations == p.observations and again.b_noise == 250.0


def test_changed_workload_or_backend_misses_the_cache(tmp_path):
    save_profile(_profile(), tmp_path)
    changed = {**WORKLOAD, "ppo": {"lr": 1e-3}}
    assert profile_path(changed, "local", tmp_path) != profile_path(WORKLOAD, "local", tmp_path)
    assert load_profile(changed, "local", tmp_path) is None
    assert load_profile(WORKLOAD, "ray", tmp_path) is None


def test_changed_hardware_invalidates(tmp_path, monkeypatch):
    save_profile(_profile(), tmp_path)
    monkeypatch.setattr(profiles, "hardware_fingerprint", lambda: "another-machine")
    assert load_profile(WORKLOAD, "local", tmp_path) is None


def test_corrupt_or_mismatched_file_is_ignored(tmp_path):
    path = save_profile(_profile(), tmp_path)
    path.write_text("{not json")
    assert load_profile(WORKLOAD, "local", tmp_path) is None
    d = _profile().as_dict()
    d["workload"] = {"env_id": "other"}
    path.write_text(json.dumps(d))
    assert load_profile(WORKLOAD, "local", tmp_path) is None


def test_performance_model_fits_synthetic_profile():
    model = PerformanceModel.fit(synthetic_observations())
    assert model.steps_per_s(512) == pytest.approx(1000.0, rel=0.05)
    assert model.steps_per_s(1769) == pytest.approx(3000.0, rel=0.05)
    assert model.fit_error["iteration_s_mdape_in_sample"] < 0.05
    assert "iteration_s_mdape_leave_one_out" in model.fit_error
    # between profiled sizes the rate is interpolated monotonically
    assert 1000.0 < model.steps_per_s(1024) < 3000.0


def test_no_shape_is_cheaper_per_env_step_than_the_floor():
    from optimizers.seraph.models import CostModel, Prices, all_shapes

    cost = CostModel(PerformanceModel.fit(synthetic_observations()), Prices(gb_second_usd=1e-5, request_usd=1e-7, learner_usd_per_s=2e-5))
    floor = cost.per_step_floor()
    # billed per step 1/1000 s at 512 MB (0.5 GB) beats 1/3000 s at 1,769 MB (1.73 GB); the learner takes 1e-4 s a sample
    assert floor["cheapest_memory_mb"] == 512
    assert floor["function_compute_usd_per_step"] == pytest.approx(1e-3 * 0.5 * 1e-5, rel=0.05)
    assert floor["learner_update_usd_per_step"] == pytest.approx(1e-4 * 2e-5, rel=0.05)
    shapes = all_shapes([1, 2, 4, 8], [512, 1769], [500, 2000, 64000], min_steps_per_actor=1)
    per_step = [cost.per_step_cost(s) for s in shapes]
    assert min(per_step) >= floor["usd_per_step"]
    # with the learner VM paid only while it updates, a large batch spreads every fixed part
    # thin: close to the floor, not under it (paid for the whole iteration, the VM's wait for
    # the rollout is a cost the floor leaves out)
    busy = CostModel(cost.perf, Prices(gb_second_usd=1e-5, request_usd=1e-7, learner_usd_per_s=2e-5, learner_billing="busy"))
    assert busy.per_step_floor() == floor
    assert floor["usd_per_step"] < busy.per_step_cost(RunShape(1, 512, 64000)) < 1.05 * floor["usd_per_step"]
    assert cost.per_step_cost(RunShape(1, 512, 64000)) > 2 * floor["usd_per_step"]


def test_the_update_thread_speedups_round_trip(tmp_path):
    from serverless.learner_machines import ThreadScaling

    measured = ThreadScaling(((1, 1.0), (2, 0.82)), "measured, wall, host load 3.10")
    p = Profile(workload=WORKLOAD, backend="local", hardware=profiles.hardware_fingerprint(),
                observations=synthetic_observations(), noise=ProfileNoise(),
                pilot=PilotSummary(learner_timing={"rows": [], **measured.as_dict()}), memory_sweep=[512, 1769])
    save_profile(p, tmp_path)
    again = load_profile(WORKLOAD, "local", tmp_path)
    assert again is not None and again.pilot.thread_scaling == measured


def test_a_profile_without_thread_speedups_counts_one_thread():
    """A profile from before they were measured (files of an older version are re-measured: the
    version is in the key) reads as one thread at 1.0."""
    old = PilotSummary.from_dict({"learner_timing": {"rows": []}})
    assert old.thread_scaling.best(4) == (1, 1.0)
    assert profiles.PROFILE_VERSION >= 11


def test_a_malformed_thread_speedup_makes_the_profile_unreadable(tmp_path):
    path = save_profile(_profile(), tmp_path)
    d = json.loads(path.read_text())
    d["pilot"]["learner_timing"] = {"threads_speedup": {"1": 1.0, "2": -3}}
    path.write_text(json.dumps(d))
    assert load_profile(WORKLOAD, "local", tmp_path) is None
