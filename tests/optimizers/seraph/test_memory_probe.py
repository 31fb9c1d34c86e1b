"""The memory probe on a scripted backend, and how its rows enter the performance model."""

import dataclasses
import math

import pytest

from optimizers.seraph.memory_probe import charge_learner_wait, probe_memory_sizes
from optimizers.seraph.models import Observation, PerformanceModel
from serverless.run_shape import RunShape
from serverless.invocation import BillingRecord, Invocation, InvokeBatch

INIT_MS = 400.0


class ScriptedBackend:
    """30 us per step at one vCPU, 20 ms per call; the first call at each size is cold.

    Above one vCPU the handler gains nothing (single-threaded), unless ``keeps_gaining``.
    """

    name = "scripted"

    def __init__(self, label: str = "modelled", keeps_gaining: bool = False) -> None:
        self.label = label
        self.keeps_gaining = keeps_gaining
        self.calls: list[tuple[int, int]] = []

    def invoke(self, events, memory_mb, concurrency=None):
        cold = all(m != memory_mb for m, _ in self.calls)
        self.calls.append((memory_mb, len(events)))
        slowdown = 1769 / memory_mb if self.keeps_gaining else max(1.0, 1769 / memory_mb)
        duration_ms = 30e-3 * events[0]["num_steps"] * slowdown
        init_ms = INIT_MS if cold else 0.0
        bill = BillingRecord(
            billed_ms=int(duration_ms) + 1, duration_ms=duration_ms, init_ms=init_ms, memory_mb=memory_mb,
            cold_start=cold, label="modelled",
        )
        lambda_s = (20.0 + init_ms + duration_ms) / 1000.0
        return InvokeBatch([Invocation({"ok": True}, bill)], wall_s=0.01, lambda_s=lambda_s, lambda_s_label=self.label, concurrency=1)

    def close(self):
        pass


def test_a_cold_then_a_warm_call_per_size_give_cold_start_and_warm_speed():
    backend = ScriptedBackend()
    out = probe_memory_sizes("CartPole-v1", [512, 3008], backend, hidden=(64, 64), steps=256, cold_steps=32)
    assert backend.calls == [(512, 1), (512, 1), (3008, 1), (3008, 1)]
    rows = {r["memory_mb"]: r for r in out["rows"]}
    assert rows[512]["warm_lambda_s"] == pytest.approx((20.0 + 30e-3 * 256 * 1769 / 512) / 1000.0)
    assert rows[3008]["warm_lambda_s"] == pytest.approx((20.0 + 30e-3 * 256) / 1000.0)
    assert rows[512]["init_s"] == pytest.approx(INIT_MS / 1000.0)
    # the cold call only starts the sandbox: 32 steps, its init on top
    assert rows[512]["cold_lambda_s"] == pytest.approx((20.0 + INIT_MS + 30e-3 * 32 * 1769 / 512) / 1000.0)
    assert rows[512]["cold_steps"] == 32 and rows[512]["steps"] == 256
    # the speed is the warm call's handler duration as measured, beside its billed (rounded) one
    assert rows[512]["duration_s"] == pytest.approx(30e-3 * 256 * 1769 / 512 / 1000.0)
    assert rows[512]["billed_s"] > rows[512]["duration_s"]
    assert {o.shape.memory_mb: o.duration_s for o in out["observations"]} == {m: rows[m]["duration_s"] for m in rows}
    assert all(o.rollout_only and not o.cold for o in out["observations"])
    assert out["env_steps"] == 2 * (32 + 256)


def test_modelled_probe_time_is_the_makespan_and_measured_is_the_sum():
    modelled = probe_memory_sizes("CartPole-v1", [512, 3008], ScriptedBackend("modelled"), hidden=(64, 64), steps=256)
    measured = probe_memory_sizes("CartPole-v1", [512, 3008], ScriptedBackend("measured"), hidden=(64, 64), steps=256)
    per_size = [r["cold_lambda_s"] + r["warm_lambda_s"] for r in modelled["rows"]]
    assert modelled["lambda_time_s"] == pytest.approx(max(per_size))
    assert measured["lambda_time_s"] == pytest.approx(sum(per_size))
    assert "makespan" in modelled["lambda_time_label"] and "sum" in measured["lambda_time_label"]
    # the learner VM waits through the probe: a longer probe costs more
    assert measured["cost_usd"] > modelled["cost_usd"] > 0


def test_a_modelled_probe_beside_the_pilot_adds_only_what_outlasts_it():
    alone = probe_memory_sizes("CartPole-v1", [512, 3008], ScriptedBackend("modelled"), hidden=(64, 64), steps=256)
    span = alone["span_s"]
    assert alone["learner_wait_s"] == pytest.approx(span)  # nothing beside it: the learner waits it all
    shorter = charge_learner_wait(alone, beside_s=span / 4)
    assert shorter["lambda_time_s"] == pytest.approx(0.75 * span)
    covered = charge_learner_wait(alone, beside_s=10 * span)
    assert covered["lambda_time_s"] == 0.0
    # the functions are paid in full either way; only the learner's wait goes
    assert covered["cost_usd"] == pytest.approx(alone["function_cost_usd"]) and covered["cost_usd"] > 0
    assert alone["cost_usd"] > shorter["cost_usd"] > covered["cost_usd"]
    assert alone["cost_usd"] - covered["cost_usd"] == pytest.approx(span * alone["learner_usd_per_s"])
    # applying it again recomputes from the span instead of subtracting twice
    assert charge_learner_wait(shorter, beside_s=span / 4)["lambda_time_s"] == pytest.approx(0.75 * span)


def test_a_measured_probe_ran_alone_so_the_learner_waits_its_whole_span():
    measured = probe_memory_sizes("CartPole-v1", [512, 3008], ScriptedBackend("measured"), hidden=(64, 64), steps=256)
    beside = charge_learner_wait(measured, beside_s=100.0)
    assert beside["lambda_time_s"] == pytest.approx(measured["span_s"])
    assert beside["cost_usd"] == pytest.approx(measured["cost_usd"])
    with pytest.raises(ValueError, match="at least 0"):
        charge_learner_wait(measured, beside_s=-1.0)


SWEEP = [512, 885, 1769, 3008, 5307, 10240]


def test_sizes_past_the_plateau_are_not_probed():
    backend = ScriptedBackend()  # no gain above one vCPU
    out = probe_memory_sizes("CartPole-v1", SWEEP, backend, hidden=(64, 64), steps=256)
    assert [r["memory_mb"] for r in out["rows"]] == [512, 885, 1769, 3008]
    assert out["skipped_sizes"] == [5307, 10240] and "3008 MB" in out["skipped_reason"]
    assert {m for m, _ in backend.calls} == {512, 885, 1769, 3008}  # nothing was paid at the larger sizes
    # one wave: the four sizes together
    assert out["span_s"] == pytest.approx(max(r["cold_lambda_s"] + r["warm_lambda_s"] for r in out["rows"]))


def test_a_handler_that_keeps_gaining_gets_every_size_one_wave_at_a_time():
    out = probe_memory_sizes("CartPole-v1", SWEEP, ScriptedBackend(keeps_gaining=True), hidden=(64, 64), steps=256)
    rows = out["rows"]
    assert [r["memory_mb"] for r in rows] == SWEEP and out["skipped_sizes"] == [] and out["skipped_reason"] is None
    per_size = {r["memory_mb"]: r["cold_lambda_s"] + r["warm_lambda_s"] for r in rows}
    first_wave = max(per_size[m] for m in (512, 885, 1769, 3008))
    assert out["span_s"] == pytest.approx(first_wave + per_size[5307] + per_size[10240])


def test_no_memory_sizes_is_an_error():
    with pytest.raises(ValueError, match="at least one memory size"):
        probe_memory_sizes("CartPole-v1", [], ScriptedBackend(), hidden=(64, 64))


def _training_rows():
    rows = []
    for actors, batch in [(32, 1024), (16, 1024), (8, 2048), (8, 512), (4, 1024), (2, 512), (1, 512)]:
        s = RunShape(actors, 1769, batch)
        roll = 0.02 + 0.005 * math.log2(actors) + 30e-6 * batch / actors
        learner = 0.1e-3 * batch
        rows.append(Observation(s, roll, roll - 0.015, learner, roll + learner + 0.005))
    return rows


def test_probe_rows_set_memory_speeds_but_not_the_learner_fit():
    probe = [
        Observation(RunShape(1, 512, 256), 0.02 + 30e-6 * 256 * 1769 / 512, 0.03, 0.0, 0.05, rollout_only=True),
        Observation(RunShape(1, 3008, 256), 0.02 + 30e-6 * 256, 0.01, 0.0, 0.03, rollout_only=True),
    ]
    with_probe = PerformanceModel.fit([*probe, *_training_rows()])
    without = PerformanceModel.fit(_training_rows())
    assert with_probe.memory_levels == [512, 1769, 3008]
    assert with_probe.learner_coef == pytest.approx(without.learner_coef)
    assert with_probe.other_coef == pytest.approx(without.other_coef)
    # 512 MB is 1769/512 times slower per step than one vCPU; 3008 MB no faster than one vCPU
    assert with_probe.steps_per_s(1769) / with_probe.steps_per_s(512) == pytest.approx(1769 / 512, rel=0.15)
    assert with_probe.steps_per_s(3008) == pytest.approx(with_probe.steps_per_s(1769), rel=0.15)


def test_speed_ratios_come_from_measured_durations_not_rounded_bills():
    # 7.4 ms at one vCPU and 16.3 ms at half of one: 2.20x per step. Billed to the next ms
    # they read 8 and 17 ms, 2.125x, which would make 885 MB look 4% faster than it is.
    probe = [
        Observation(RunShape(1, 1769, 256), 0.0274, 0.008, 0.0, 0.0274, rollout_only=True, duration_s=0.0074),
        Observation(RunShape(1, 885, 256), 0.0363, 0.017, 0.0, 0.0363, rollout_only=True, duration_s=0.0163),
    ]
    model = PerformanceModel.fit([*probe, *_training_rows()])
    assert model.steps_per_s(1769) / model.steps_per_s(885) == pytest.approx(16.3 / 7.4, rel=1e-6)
    # rows saved without durations (older profiles) fall back to the billed figures
    billed_only = [Observation(o.shape, o.rollout_s, o.billed_s, 0.0, o.iteration_s, rollout_only=True) for o in probe]
    old = PerformanceModel.fit([*billed_only, *_training_rows()])
    assert old.steps_per_s(1769) / old.steps_per_s(885) == pytest.approx(17 / 8, rel=1e-6)
    assert Observation.from_dict(probe[1].as_dict()).duration_s == 0.0163


def test_no_size_below_one_vcpu_runs_faster_than_its_cpu_share():
    # a noisy probe reads 885 MB at 1.7x and 512 MB at 3.0x one vCPU's per-step time; their CPU
    # shares allow no less than 1769/885 = 2.0x and 1769/512 = 3.46x. 3,008 MB reads 0.8x:
    # above one vCPU the share sets no bound (a handler may use more threads), so it stays.
    def row(m, ms):
        return Observation(RunShape(1, m, 256), 0.02 + ms / 1000, ms / 1000, 0.0, 0.02 + ms / 1000,
                           rollout_only=True, duration_s=ms / 1000)

    probe = [row(1769, 7.5), row(885, 7.5 * 1.7), row(512, 7.5 * 3.0), row(3008, 7.5 * 0.8), row(10240, 7.5 * 0.95)]
    model = PerformanceModel.fit([*probe, *_training_rows()])
    k = {m: 1 / model.steps_per_s(m) for m in (512, 885, 1769, 3008, 10240)}
    assert k[885] / k[1769] == pytest.approx(1769 / 885, rel=1e-6)
    assert k[512] / k[1769] == pytest.approx(1769 / 512, rel=1e-6)
    assert k[3008] / k[1769] == pytest.approx(0.8, rel=1e-6) and k[10240] / k[1769] == pytest.approx(0.95, rel=1e-6)
    # a size read slower than its share keeps its reading
    slow = PerformanceModel.fit([row(1769, 7.5), row(885, 7.5 * 2.4), *_training_rows()])
    assert (1 / slow.steps_per_s(885)) / (1 / slow.steps_per_s(1769)) == pytest.approx(2.4, rel=1e-6)
    # the cost model's billed time takes the same bound (training rows billed in proportion
    # to each function's steps, so the billed fit has a per-step term to scale)
    billed = [dataclasses.replace(o, billed_s=0.005 + 30e-6 * o.shape.steps_per_actor) for o in _training_rows()]
    priced = PerformanceModel.fit([*probe, *billed])
    assert priced.billed_coef["k@1769"] == pytest.approx(30e-6, rel=1e-6)
    assert priced.billed_coef["k@885"] / priced.billed_coef["k@1769"] == pytest.approx(1769 / 885, rel=1e-6)
    assert priced.billed_coef["k@512"] / priced.billed_coef["k@1769"] == pytest.approx(1769 / 512, rel=1e-6)
    assert priced.billed_coef["k@3008"] / priced.billed_coef["k@1769"] == pytest.approx(0.8, rel=1e-6)


def test_probe_rows_alone_cannot_fit_a_learner():
    probe = [Observation(RunShape(1, m, 256), 0.03, 0.01, 0.0, 0.03, rollout_only=True) for m in (512, 1769, 3008)]
    with pytest.raises(ValueError, match="training iteration"):
        PerformanceModel.fit(probe)


def test_sizes_are_compared_within_the_probe_and_levelled_by_the_pilot():
    # The pilot's per-step time at 1,769 MB is 1.3x the probe's (functions share the cores);
    # a joint fit would then call 3,008 MB faster than 1,769 MB. Within the probe they are equal.
    def probe_row(m):
        roll = 0.02 + 30e-6 * 256 * max(1.0, 1769 / m)
        return Observation(RunShape(1, m, 256), roll, roll - 0.02, 0.0, roll, rollout_only=True)

    pilot = []
    for actors, batch in [(16, 1024), (8, 2048), (8, 512), (4, 1024), (2, 512), (1, 512)]:
        roll = 0.02 + 0.005 * math.log2(actors) + 1.3 * 30e-6 * batch / actors
        pilot.append(Observation(RunShape(actors, 1769, batch), roll, roll - 0.02, 0.1e-3 * batch, roll + 0.1e-3 * batch))
    model = PerformanceModel.fit([probe_row(m) for m in (512, 1769, 3008, 10240)] + pilot)
    assert model.memory_levels == [512, 1769, 3008, 10240]
    assert model.steps_per_s(1769) == pytest.approx(1 / (1.3 * 30e-6), rel=0.05)  # the pilot's level
    assert model.steps_per_s(3008) == pytest.approx(model.steps_per_s(1769), rel=0.01)
    assert model.steps_per_s(10240) == pytest.approx(model.steps_per_s(1769), rel=0.01)
    assert model.steps_per_s(1769) / model.steps_per_s(512) == pytest.approx(1769 / 512, rel=0.01)


def test_refit_with_run_rows_at_another_size_keeps_every_probed_size():
    # A re-plan refits on the profile plus the run's recent iterations, which may be at a
    # size the pilot never ran; every probed size must still get a rate.
    probe = [Observation(RunShape(1, m, 256), 0.03, 0.01 * max(1.0, 1769 / m), 0.0, 0.03, rollout_only=True)
             for m in (512, 1769, 3008, 10240)]
    pilot = [Observation(RunShape(a, 1769, 1024), 0.02 + 30e-6 * 1024 / a, 0.01, 0.1, 0.15) for a in (1, 2, 4, 8)]
    run = [Observation(RunShape(1, 3008, 512), 0.02 + 25e-6 * 512, 0.012, 0.05, 0.09) for _ in range(3)]
    model = PerformanceModel._fit_once([*probe, *pilot, *run])
    assert model.memory_levels == [512, 1769, 3008, 10240]
    for m in model.memory_levels:
        assert model.rollout_s(RunShape(2, m, 1024)) > 0
    # 3,008 MB keeps the run's own measurement; 512 MB is scaled from 1,769 MB by the probe
    assert model.rollout_coef["k@3008"] == pytest.approx(25e-6, rel=0.05)
    assert model.rollout_coef["k@512"] == pytest.approx(model.rollout_coef["k@1769"] * 1769 / 512, rel=0.01)


@pytest.mark.parametrize(
    ("cpu_share", "baseline_mb", "expected"),
    [
        (0.95, 1769, []),  # CPU-bound on one thread, baseline at one vCPU: nothing left to probe
        (0.95, 3008, [3008]),  # the baseline's own size is still scored from a measurement
        (0.5, 1769, None),  # the handler waits: a smaller size may be cheaper, probe the sweep
        (1.8, 1769, None),  # several threads: a larger size may pay, probe the sweep
        (None, 1769, None),  # no timings reported: probe the sweep
    ],
)
def test_the_cost_objective_probes_only_what_a_cpu_bound_rollout_leaves_open(cpu_share, baseline_mb, expected):
    from optimizers.seraph.memory_probe import cost_probe_sizes

    assert cost_probe_sizes(cpu_share, [512, 885, 1769, 3008, 5307], baseline_mb) == expected


def test_an_empty_probe_costs_nothing_and_adds_no_time():
    from optimizers.seraph.memory_probe import no_probe

    probe = charge_learner_wait(no_probe([512, 3008], "why", learner_usd_per_s=2.5e-5, modelled=True), beside_s=1.0)
    assert probe["rows"] == [] and probe["observations"] == []
    assert probe["cost_usd"] == 0.0 and probe["lambda_time_s"] == 0.0
    assert probe["skipped_sizes"] == [512, 3008]
