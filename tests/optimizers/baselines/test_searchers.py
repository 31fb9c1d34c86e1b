"""Baseline ingestion optimizers on a known objective (no TensorFlow, no timing)."""

from __future__ import annotations

import pytest

from ingestion.dlrm import DLRM_AUTOTUNABLE, dlrm_knob_space
from ingestion.knobs import Knob, KnobSpace
from ingestion.node import Node
from ingestion.pipeline import PipelineSpec
from ingestion.measurement import Measurement
from optimizers.asktell import run
from optimizers.ingestion_optimizers import INGESTION_OPTIMIZERS, IngestJob
from optimizers.tuning import build_optimizer
from optimizers.baselines.autotune import autotune_config
from optimizers.baselines.grid import GridSearch
from optimizers.baselines.heuristic import heuristic_config
from optimizers.baselines.hillclimb import HillClimb
from optimizers.baselines.naive import naive_config
from optimizers.baselines.optuna_search import OptunaSearch
from core.errors import UserError

NODE = Node("test", vcpus=2, ram_gib=4)
SPACE = dlrm_knob_space(NODE)


def objective(c):
    """A pipeline whose transform stage is the bottleneck; prefetch helps a little."""
    rate = min(10 + 40 * c["transform_parallelism"], 30 + 20 * c["parse_parallelism"] + 5 * c["read_parallelism"])
    return Measurement(rows_per_s=rate + c["prefetch_buffer"] + 0.1 * c["cycle_length"], label="simulated")


def best_in_grid():
    return max(objective(c).rows_per_s for c in SPACE.grid())


def _spec(space=SPACE, autotunable=DLRM_AUTOTUNABLE):
    return PipelineSpec("fake", build=lambda c: None, space=space, rows_per_element=1, autotunable=autotunable)


def test_grid_is_exhaustive_and_finds_the_optimum():
    g = GridSearch(SPACE)
    r = run(g, objective)
    assert len(r.trials) == SPACE.grid_size() == 80
    assert r.best.rows_per_s == best_in_grid()


@pytest.mark.parametrize("make", [lambda: HillClimb(SPACE, seed=1), lambda: OptunaSearch(SPACE, seed=1)])
def test_searchers_reach_the_optimum_and_stay_in_budget(make):
    opt = make()
    r = run(opt, objective, max_trials=60)
    assert r.best.rows_per_s == best_in_grid()
    assert all(SPACE.is_valid(t.config) for t in r.trials)
    keys = [tuple(sorted(t.config.items())) for t in r.trials]
    assert len(keys) == len(set(keys))  # never measures a configuration twice


def test_hillclimb_ends_when_every_configuration_is_seen():
    r = run(HillClimb(SPACE), objective, max_trials=500)
    assert r.stopped_by == "optimizer finished" and len(r.trials) == 80


def test_single_configuration_baselines():
    naive = naive_config(SPACE)
    assert all(naive[k.name] == 0 for k in SPACE.cpu_knobs) and SPACE.is_valid(naive)
    heur = heuristic_config(SPACE, 2)
    assert all(heur[k.name] == 2 for k in SPACE.cpu_knobs)
    assert SPACE.cpu_used(heur) > SPACE.cpu_budget  # oversubscribed on purpose
    auto = autotune_config(_spec())
    assert {k for k, v in auto.items() if v == -1} == set(DLRM_AUTOTUNABLE)
    assert auto["batch_size"] == 4096 and auto["shuffle_buffer"] == 1024


def test_autotune_knobs_default_for_a_user_pipeline():
    space = KnobSpace((Knob("threads", (1, 2), kind="cpu"), Knob("prefetch", (1, 2), kind="buffer", stage="prefetch"),
                       Knob("block", (8, 16))), cpu_budget=2)
    assert autotune_config(_spec(space, None)) == {"threads": -1, "prefetch": -1, "block": 8}


def test_registry_names_and_unknown_optimizer():
    for name in ("naive", "heuristic", "autotune", "grid", "hillclimb", "optuna"):
        assert build_optimizer(IngestJob.create(_spec(), NODE, time_budget_s=60), name).ask() is not None
    with pytest.raises(UserError, match="unknown ingestion optimizer 'random'; allowed: intune, "):
        build_optimizer(IngestJob.create(_spec(), NODE, time_budget_s=60), "random")
    assert set(INGESTION_OPTIMIZERS) >= {"intune", "plumber"}
    assert [n for n in INGESTION_OPTIMIZERS if INGESTION_OPTIMIZERS.get(n).needs_calibration] == ["plumber"]


class _SimulatedWorker:
    """Stands in for the measuring subprocess: every measurement comes from the simulator."""

    def __init__(self, truth, node):
        self.truth, self.node = truth, node

    def measure(self, config, **_protocol):
        from ingestion.simulator import simulate

        return simulate(self.truth, config, self.node)

    def close(self):
        pass


def _simulated_problem():
    import numpy as np

    from ingestion.simulator import dlrm_like_space, random_pipeline

    node = Node("sim-4", vcpus=4, ram_gib=8)
    truth = random_pipeline(np.random.default_rng(5), "parse")
    spec = PipelineSpec("sim", build=lambda c: None, space=dlrm_like_space(node), rows_per_element=1)
    return spec, node, truth


def test_tune_pipeline_calibrates_by_itself_only_for_an_optimizer_that_requires_it(monkeypatch):
    import ingestion.calibrate
    from optimizers.tuning import TuningOptions, tune_pipeline

    spec, node, truth = _simulated_problem()
    calls = []
    monkeypatch.setattr(ingestion.calibrate, "calibrate", lambda s, n, **kw: calls.append((s.name, n.name)) or truth)
    worker = _SimulatedWorker(truth, node)
    plumber = tune_pipeline(IngestJob.create(spec, node, time_budget_s=60, final=None), "plumber",
                            TuningOptions(worker=worker, progress=False))
    assert calls == [("sim", "sim-4")]  # as `trainwise ingest tune --optimizer plumber` does
    assert plumber.optimizer == "plumber" and spec.space.is_valid(plumber.config) and plumber.label == "simulated"
    assert plumber.to_json()["search"]["trials"] == 1
    grid = tune_pipeline(IngestJob.create(spec, node, time_budget_s=60, max_trials=3, final=None), "grid",
                         TuningOptions(worker=worker, progress=False))
    assert calls == [("sim", "sim-4")] and grid.search["trials"] == 3  # the grid never pays for profiling


def test_intune_uses_the_calibration_it_is_given(monkeypatch, tmp_path):
    import ingestion.calibrate
    from optimizers.tuning import TuningOptions, tune_pipeline

    monkeypatch.setenv("TRAINWISE_HOME", str(tmp_path))
    spec, node, truth = _simulated_problem()

    def no_calibration(*args, **kwargs):
        raise AssertionError("InTune calibrated although a calibration was given")

    monkeypatch.setattr(ingestion.calibrate, "calibrate", no_calibration)
    given = []
    job = IngestJob.create(spec, node, time_budget_s=60, max_trials=3, final=None,
                           calibration=lambda: given.append(1) or truth)
    result = tune_pipeline(job, "intune", TuningOptions(worker=_SimulatedWorker(truth, node), progress=False))
    assert given == [1] and result.optimizer == "intune" and spec.space.is_valid(result.config)
