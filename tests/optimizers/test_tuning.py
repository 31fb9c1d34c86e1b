"""Re-anchoring a calibration to the machine's speed now, and the benchmark's control
measurements during the grid: a fake pipeline whose speed changes by a known factor (no
TensorFlow, no timing)."""

from __future__ import annotations

import argparse

import pytest

from benchmarks import ingestion_live as bench
from ingestion.calibrate import Calibration, reanchor, scale_level, sequential_config
from ingestion.dlrm import dlrm_knob_space
from ingestion.node import Node
from ingestion.pipeline import PipelineSpec
from ingestion.simulator import model_from_space, simulate
from optimizers.tuning import IngestJob, TuningOptions, tune_pipeline
from ingestion.measurement import Measurement

NODE = Node("test", vcpus=2, ram_gib=4)
SPACE = dlrm_knob_space(NODE)


def _truth():
    costs = {"read": 2e-6, "shuffle": 5e-7, "batch": 1e-7, "parse": 4e-6, "transform": 3e-6, "prefetch": 1e-7}
    return model_from_space(SPACE, costs={s: {"cpu_s_per_row": c, "bytes_per_row": 300.0} for s, c in costs.items()},
                            burstiness=0.1, oversub_overhead=0.0, core_contention=0.2, source="truth")


def _calibration(model) -> Calibration:
    return Calibration(model, sequential_config(SPACE), {}, base_samples=[1.0])


class FakeWorker:
    """Measures the true model; ``speed`` is the machine's speed now (1 = as at calibration)."""

    def __init__(self, truth, speed=1.0):
        self.truth, self.speed, self.calls = truth, speed, []

    def measure(self, config, **protocol):
        self.calls.append((dict(config), dict(protocol)))
        m = simulate(self.truth, config, NODE)
        return Measurement(rows_per_s=m.rows_per_s * self.speed, peak_rss_mb=m.peak_rss_mb, label="measured")

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return False


def test_scale_level_moves_every_configuration_by_the_same_factor():
    truth = _truth()
    slower = scale_level(truth, 1.7)
    for config in list(SPACE.grid())[::7]:
        assert simulate(slower, config, NODE).rows_per_s == pytest.approx(simulate(truth, config, NODE).rows_per_s / 1.7)


def test_reanchor_recovers_a_known_level_change_and_keeps_knob_effects():
    truth = _truth()
    cal = _calibration(truth)
    worker = FakeWorker(truth, speed=1.6)  # the machine runs 1.6x faster than at calibration
    moved = reanchor(cal, NODE, evaluate=worker.measure, samples=3)
    assert len(worker.calls) == 3 and all(c == cal.profile_config for c, _ in worker.calls)
    assert all(p == {"warmup_s": 0.5, "window_s": 1.0, "repeats": 1} for _, p in worker.calls)  # calibration's protocol
    record = moved.reanchors[-1]
    assert record["level_factor"] == pytest.approx(1.6) and record["label"] == "measured"
    for config in list(SPACE.grid())[::5]:  # every configuration, not only the base: the truth at the new speed
        assert simulate(moved.model, config, NODE).rows_per_s == pytest.approx(1.6 * simulate(truth, config, NODE).rows_per_s)
    assert cal.reanchors == [] and moved.model is not cal.model  # the original is left alone
    assert Calibration.from_json(moved.to_json()).reanchors == moved.reanchors


def test_reanchor_with_nothing_measured_keeps_the_level():
    cal = _calibration(_truth())
    kept = reanchor(cal, NODE, evaluate=lambda c, **kw: Measurement(rows_per_s=0.0, failed=True), samples=2)
    assert kept.model == cal.model and "level kept" in kept.reanchors[-1]["note"]


def test_tune_pipeline_interleaves_control_measurements_that_are_not_trials():
    truth = _truth()
    worker = FakeWorker(truth)
    spec = PipelineSpec("fake", build=lambda c: None, space=SPACE, rows_per_element=1)
    control = sequential_config(SPACE)
    out = tune_pipeline(IngestJob.create(spec, NODE, time_budget_s=600, final=None), "grid",
                        TuningOptions(worker=worker, progress=False, control=control, control_every=10))
    search = out.search
    assert search["trials"] == len(search["history"]) == SPACE.grid_size() == 80
    assert [c["before_trial"] for c in search["controls"]] == list(range(0, 80, 10)) + [80]
    assert len(worker.calls) == 80 + 9
    assert all(worker.calls[i][0] == control for i in range(0, 89, 11))  # a control before every 10 trials
    assert search["control_config"] == control


def test_benchmark_grid_reports_both_errors_and_the_drift(monkeypatch):
    """The calibration is exact at speed 1; the machine then runs 1.5x faster. Re-anchored before
    the grid, the model is exact again; as calibrated it is 1/3 low everywhere. The controls show
    the speed during the grid and are not applied to any measured rows/s."""
    truth = _truth()
    cal = _calibration(truth)
    worker = FakeWorker(truth, speed=1.5)
    monkeypatch.setattr("ingestion.measure.MeasureWorker", lambda *a, **kw: worker)
    spec = PipelineSpec("fake", build=lambda c: None, space=SPACE, rows_per_element=1, factory="tests:none")
    args = argparse.Namespace(seed=0, verbose=False, control_every=10, reanchor_samples=5, grid_passes=1)
    holder: dict = {}
    grid = bench._grid_with_controls(spec, NODE, args, cal, holder, 600)
    history = grid["search"]["history"]
    assert all(t["rows_per_s"] == pytest.approx(1.5 * simulate(truth, t["config"], NODE).rows_per_s) for t in history)
    as_cal = bench.simulator_error(spec, NODE, cal, history)
    moved = bench.simulator_error(spec, NODE, holder["c"], history)
    assert as_cal["mean_rel_error"] == pytest.approx(1 / 3) and as_cal["model_low_on"] == 80
    assert moved["mean_rel_error"] == pytest.approx(0.0, abs=1e-9)
    drift = bench.drift_report(cal, holder["c"], grid["search"]["controls"], moved)
    assert drift["reanchor_level_factor"] == pytest.approx(1.5)
    assert len(drift["controls"]) == 9 and drift["controls_max_over_min"] == pytest.approx(1.0)
    assert [b["trials"] for b in drift["blocks"]] == [[i, i + 10] for i in range(0, 80, 10)]
    fmt = {"format": "fake", "results": [], "simulator_error": as_cal, "simulator_error_reanchored": moved}
    bars = {b["bar"]: b["met"] for b in bench.check_bars([fmt])}
    assert bars == {"simulator mean error over grid < 15% (as calibrated)": False,
                    "simulator mean error over grid < 15% (re-anchored before the grid)": True}


def test_control_tracked_error_follows_the_controls_between_grid_points():
    """A model exact at level 100 and a machine whose base configuration measures 100, then 200:
    with the level interpolated between the controls the error is what the interpolation misses."""
    pairs = [{"trial": i, "simulated_rows_per_s": 10.0, "measured_rows_per_s": 10.0 * (1.0 + (i + 0.5) / 10)}
             for i in range(10)]
    controls = [{"before_trial": 0, "rows_per_s": 100.0, "oom": False}, {"before_trial": 10, "rows_per_s": 200.0, "oom": False}]
    out = bench.control_tracked_error(100.0, pairs, controls)
    assert out["mean_rel_error"] == pytest.approx(0.0, abs=1e-12) and "not the bar figure" in out["label"]
    assert bench.control_tracked_error(100.0, pairs, controls[:1]) is None
