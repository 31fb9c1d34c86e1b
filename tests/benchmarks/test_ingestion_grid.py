"""The benchmark's grid measured in several passes (``--grid-passes``): each pass in the reverse
order of the one before, a configuration's figure the mean of its passes, an OOM in any pass
making it OOM, and everything downstream (oracle candidates, simulator error, drift) using the
combined figure. A fake worker whose speed drifts by a known amount per measurement stands in
for TensorFlow (no timing)."""

from __future__ import annotations

import argparse

import pytest

import optimizers.tuning  # noqa: F401  imported before any test patches MeasureWorker, so its own name stays the real class
from benchmarks import ingestion_live as bench
from ingestion.calibrate import Calibration, sequential_config
from ingestion.dlrm import dlrm_knob_space
from ingestion.node import Node
from ingestion.pipeline import PipelineSpec
from ingestion.simulator import model_from_space, simulate
from ingestion.measurement import Measurement

NODE = Node("test", vcpus=2, ram_gib=4)
SPACE = dlrm_knob_space(NODE)
SPEC = PipelineSpec("fake", build=lambda c: None, space=SPACE, rows_per_element=1, factory="tests:none")


def _model():
    costs = {"read": 2e-6, "shuffle": 5e-7, "batch": 1e-7, "parse": 4e-6, "transform": 3e-6, "prefetch": 1e-7}
    return model_from_space(SPACE, costs={s: {"cpu_s_per_row": c, "bytes_per_row": 300.0} for s, c in costs.items()},
                            burstiness=0.1, oversub_overhead=0.0, core_contention=0.2, source="truth")


class DriftingWorker:
    """Measures the model's throughput times a speed that grows by ``drift`` per measurement
    (controls and re-anchor samples included): a linear drift of the machine."""

    def __init__(self, model, drift=0.01):
        self.model, self.drift, self.calls = model, drift, []

    def measure(self, config, **protocol):
        speed = 1.0 + self.drift * len(self.calls)
        self.calls.append(dict(config))
        m = simulate(self.model, config, NODE)
        return Measurement(rows_per_s=m.rows_per_s * speed, peak_rss_mb=m.peak_rss_mb, label="measured")

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return False


def _trial(x: int, rows_per_s: float, oom: bool = False) -> dict:
    return {"config": {"x": x}, "rows_per_s": 0.0 if oom else rows_per_s, "peak_rss_mb": 10.0 * x, "oom": oom,
            "label": "oom" if oom else "measured"}


def _grid(monkeypatch, passes: int, drift: float = 0.01):
    model = _model()
    worker = DriftingWorker(model, drift)
    monkeypatch.setattr("ingestion.measure.MeasureWorker", lambda *a, **kw: worker)
    cal = Calibration(model, sequential_config(SPACE), {}, base_samples=[1.0])
    args = argparse.Namespace(seed=0, verbose=False, control_every=10, reanchor_samples=5, grid_passes=passes)
    holder: dict = {}
    return bench._grid_with_controls(SPEC, NODE, args, cal, holder, 600), worker, model, cal, holder


def test_passes_are_combined_by_their_mean_and_an_oom_in_any_pass_is_an_oom():
    first = [_trial(1, 100.0), _trial(2, 200.0), _trial(3, 300.0)]
    second = [_trial(3, 500.0), _trial(2, 0.0, oom=True), _trial(1, 140.0)]  # the reverse order
    combined = bench.combine_passes([first, second])
    assert [t["config"]["x"] for t in combined] == [1, 2, 3]  # the first pass's order
    assert [t["rows_per_s"] for t in combined] == [120.0, 0.0, 400.0]
    assert [t["oom"] for t in combined] == [False, True, False]
    assert combined[1]["label"] == "oom" and combined[1]["oom_passes"] == [False, True]
    assert [t["rows_per_s_passes"] for t in combined] == [[100.0, 140.0], [200.0, 0.0], [300.0, 500.0]]
    assert [t["pass_trials"] for t in combined] == [[0, 2], [1, 1], [2, 0]]
    assert [t["peak_rss_mb"] for t in combined] == [10.0, 20.0, 30.0]


def test_a_configuration_a_pass_did_not_reach_is_combined_over_the_passes_that_measured_it():
    combined = bench.combine_passes([[_trial(1, 100.0), _trial(2, 200.0)], [_trial(2, 300.0)]])
    assert [t["rows_per_s_passes"] for t in combined] == [[100.0], [200.0, 300.0]]
    assert [t["rows_per_s"] for t in combined] == [100.0, 250.0]


def test_oracle_candidates_rank_by_the_combined_figure():
    first = [_trial(1, 300.0), _trial(2, 200.0), _trial(3, 190.0)]  # 1 wins pass 1 by a lucky trial
    second = [_trial(3, 200.0), _trial(2, 230.0), _trial(1, 100.0)]
    assert [t["config"]["x"] for t in bench.grid_top(first, 3)] == [1, 2, 3]
    assert [t["config"]["x"] for t in bench.grid_top(bench.combine_passes([first, second]), 3)] == [2, 1, 3]  # 215, 200, 195
    second[1] = _trial(2, 0.0, oom=True)
    assert [t["config"]["x"] for t in bench.grid_top(bench.combine_passes([first, second]), 3)] == [1, 3]


def test_simulator_error_is_against_the_combined_figure():
    """Passes 20% below and 20% above an exact model: each pass alone is 20% off, their mean is exact."""
    model = _model()
    configs = list(SPACE.grid())[:4]
    passes = [[{**_trial(0, simulate(model, c, NODE).rows_per_s * f), "config": c} for c in order]
              for f, order in ((0.8, configs), (1.2, configs[::-1]))]
    combined = bench.combine_passes(passes)
    error = bench.simulator_error(SPEC, NODE, model, combined)
    assert error["configs"] == 4 and error["mean_rel_error"] == pytest.approx(0.0, abs=1e-12)
    assert [p["pass_trials"] for p in error["pairs"]] == [[0, 3], [1, 2], [2, 1], [3, 0]]
    report = bench.grid_passes_report(SPEC, NODE, combined, {"as calibrated": model})
    assert [e["mean_rel_error"] for e in report["simulator_error_by_pass"]["as calibrated"]] == pytest.approx([0.25, 1 / 6])


def test_second_pass_runs_in_reverse_order_with_its_own_controls_and_a_linear_drift_cancels(monkeypatch):
    grid, worker, model, _, holder = _grid(monkeypatch, passes=2)
    control = sequential_config(SPACE)
    configs = list(SPACE.grid())
    calls = worker.calls[5:]  # after the re-anchor's 5 base measurements
    per_pass = len(configs) + 9  # 80 grid points and a control before every 10 and after the last
    passes = [calls[:per_pass], calls[per_pass:]]
    assert all(p[i] == control for p in passes for i in range(0, per_pass, 11))
    trials = [[c for i, c in enumerate(p) if i % 11] for p in passes]
    assert trials[0] == configs and trials[1] == configs[::-1]

    search = grid["search"]
    assert search["passes"] == 2 and search["trials"] == 160 and search["trials_passes"] == [80, 80]
    assert grid["tuning_s"] == pytest.approx(sum(search["tuning_s_passes"]))
    assert [(c["pass"], c["before_trial"]) for c in search["controls"]] == [(k, i) for k in (1, 2) for i in range(0, 81, 10)]
    history = search["history"]
    assert [t["config"] for t in history] == configs and all(len(t["rows_per_s_passes"]) == 2 for t in history)
    # speed grows linearly per measurement; forward + reversed puts every configuration at the
    # same mean position, so combined / true is one constant and the single passes are not
    ratios = [t["rows_per_s"] / simulate(model, t["config"], NODE).rows_per_s for t in history]
    assert max(ratios) == pytest.approx(min(ratios), rel=1e-9)
    first_pass = [t["rows_per_s_passes"][0] / simulate(model, t["config"], NODE).rows_per_s for t in history]
    assert max(first_pass) / min(first_pass) > 1.5
    assert grid["config"] == bench.grid_top(history, 1)[0]["config"]

    report = bench.grid_passes_report(SPEC, NODE, history, {"re-anchored before the grid": holder["c"]})
    assert report["passes"] == 2 and report["spread"]["configs"] == 80
    errors = [e["mean_rel_error"] for e in report["simulator_error_by_pass"]["re-anchored before the grid"]]
    combined_error = bench.simulator_error(SPEC, NODE, holder["c"], history)["mean_rel_error"]
    assert errors[0] < combined_error < errors[1]  # the machine only gets faster than at the re-anchor
    assert "pass 2" in bench.passes_line(report)


def test_one_pass_is_the_grid_as_before(monkeypatch):
    grid, worker, *_ = _grid(monkeypatch, passes=1)
    assert "passes" not in grid["search"] and len(worker.calls) == 5 + 89
    assert all("rows_per_s_passes" not in t for t in grid["search"]["history"])
    assert len(grid["search"]["controls"]) == 9 and all("pass" not in c for c in grid["search"]["controls"])


def test_drift_blocks_and_control_tracked_level_follow_each_pass():
    """A model exact at level 100: pass 1's controls go 100 -> 200, pass 2's (reversed) 200 -> 300.
    The combined figure is the mean of the two passes' levels, so the control-tracked model is exact."""
    def level(k, pos):
        return (100.0 if k == 1 else 200.0) + 100.0 * (pos + 0.5) / 10

    pairs = [{"trial": i, "pass_trials": [i, 9 - i], "simulated_rows_per_s": 10.0,
              "measured_rows_per_s": 10.0 * (level(1, i) + level(2, 9 - i)) / 2 / 100} for i in range(10)]
    controls = [{"before_trial": 0, "rows_per_s": 100.0, "oom": False, "pass": 1},
                {"before_trial": 10, "rows_per_s": 200.0, "oom": False, "pass": 1},
                {"before_trial": 0, "rows_per_s": 200.0, "oom": False, "pass": 2},
                {"before_trial": 10, "rows_per_s": 300.0, "oom": False, "pass": 2}]
    out = bench.control_tracked_error(100.0, pairs, controls)
    assert out["mean_rel_error"] == pytest.approx(0.0, abs=1e-12)
    drift = bench.drift_report(Calibration(_model(), {}, {}), Calibration(_model(), {}, {}), controls,
                               {"pairs": pairs})
    assert [(b["pass"], b["trials"], b["control_before"]) for b in drift["blocks"]] == [(1, [0, 10], 100.0), (2, [0, 10], 200.0)]
    assert drift["controls_max_over_min"] == pytest.approx(3.0)


def test_pass_spread_is_the_relative_gap_between_passes():
    history = [{"rows_per_s_passes": [90.0, 110.0], "oom": False}, {"rows_per_s_passes": [100.0, 130.0], "oom": False},
               {"rows_per_s_passes": [50.0, 0.0], "oom": True}, {"rows_per_s_passes": [70.0], "oom": False}]
    spread = bench.pass_spread(history)
    assert spread["configs"] == 2
    assert spread["median_rel_spread"] == pytest.approx((0.2 + 30 / 115) / 2)
    assert spread["max_rel_spread"] == pytest.approx(30 / 115)
    assert spread["median_over_pass1"] == pytest.approx([1.0, (110 / 90 + 1.3) / 2])


@pytest.mark.parametrize("bad", ["0", "-2", "two", "1.5"])
def test_grid_passes_below_one_or_not_an_integer_is_refused(bad, capsys):
    with pytest.raises(SystemExit) as exc:
        bench.main(["--grid-passes", bad])
    assert exc.value.code == 2
    err = capsys.readouterr().err
    assert "--grid-passes" in err and "integer >= 1" in err


def test_simulator_error_splits_points_by_other_processes_load():
    """A grid point measured while another job kept a core busy (in any pass) is counted as
    disturbed in the diagnostic split; the bar figure still uses every point."""
    model = _model()
    configs = list(SPACE.grid())[:4]
    exact = [simulate(model, c, NODE).rows_per_s for c in configs]
    # configurations 0 and 1 exact and quiet; 2 and 3 measured at half speed with a core taken
    # in one pass (2) or both (3)
    first = [{**_trial(0, r * (0.5 if i >= 2 else 1.0)), "config": c, "cores_busy": 1.0,
              "other_cores_busy": 1.0 if i >= 2 else 0.05} for i, (c, r) in enumerate(zip(configs, exact))]
    second = [{**_trial(0, r * (0.5 if i >= 2 else 1.0)), "config": c, "cores_busy": 1.0,
               "other_cores_busy": 1.0 if i == 3 else 0.1} for i, (c, r) in enumerate(zip(configs, exact))][::-1]
    combined = bench.combine_passes([first, second])
    assert combined[2]["other_cores_busy_passes"] == [1.0, 0.1]
    error = bench.simulator_error(SPEC, NODE, model, combined)
    assert [p["other_cores_busy"] for p in error["pairs"]] == [0.1, 0.1, 1.0, 1.0]  # the most busy pass
    split = error["by_other_load"]
    assert split["quiet"]["configs"] == 2 and split["quiet"]["mean_rel_error"] == pytest.approx(0.0, abs=1e-12)
    assert split["disturbed"]["configs"] == 2 and split["disturbed"]["mean_rel_error"] == pytest.approx(1.0)
    assert split["disturbed"]["model_low_on"] == 0  # the model describes the undisturbed node: it is high there
    assert error["mean_rel_error"] == pytest.approx(0.5)
    assert "quiet 2 points" in bench.other_load_line(split)
    # a history without the load (older results) gets no split
    assert "by_other_load" not in bench.simulator_error(SPEC, NODE, model, [
        {k: v for k, v in t.items() if not k.startswith(("cores_busy", "other_cores_busy"))} for t in combined])
