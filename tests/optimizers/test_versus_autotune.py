"""The pick against AUTOTUNE, side by side in one worker: interleaved, the order alternating, the
ratio paired by round (a fake pipeline whose speed drifts; no TensorFlow, no timing)."""

from __future__ import annotations

import pytest

from ingestion.dlrm import dlrm_knob_space
from ingestion.measurement import Measurement, paired_ratio
from ingestion.node import Node
from ingestion.pipeline import PipelineSpec
from optimizers.baselines.autotune import COMPARE_PROTOCOL, autotune_config, compare_with_autotune
from optimizers.tuning import IngestJob, TuningOptions, tune_pipeline

NODE = Node("test", vcpus=2, ram_gib=4)
SPACE = dlrm_knob_space(NODE)
SPEC = PipelineSpec("fake", build=lambda c: None, space=SPACE, rows_per_element=1,
                    autotunable=("read_parallelism", "parse_parallelism", "transform_parallelism", "prefetch_buffer"))


class DriftingWorker:
    """AUTOTUNE's configuration runs at 100 rows/s, any other at ``pick_x``, both times the
    machine's speed, which falls by ``drift`` per measurement (so whichever runs first in a round
    gains); ``fail`` lists the calls (0-based) that fail."""

    def __init__(self, pick_x: float, drift: float = 0.05, fail: tuple[int, ...] = ()):
        self.pick_x, self.drift, self.fail, self.calls = pick_x, drift, fail, []

    def measure(self, config, **protocol):
        i = len(self.calls)
        self.calls.append((dict(config), dict(protocol)))
        if i in self.fail:
            return Measurement(rows_per_s=0.0, failed=True, extra={"failure": "oom"})
        speed = 1.0 - self.drift * i
        x = 100.0 if any(v == -1 for v in config.values()) else self.pick_x
        return Measurement(rows_per_s=x * speed)

    def close(self):
        pass


def _measure(worker):
    return lambda config, protocol: worker.measure(config, **protocol.as_kwargs())


def test_interleaved_rounds_alternate_the_order_and_recover_the_ratio_under_drift():
    worker = DriftingWorker(pick_x=180.0, drift=0.02)
    pick = SPACE.initial()
    out = compare_with_autotune(_measure(worker), pick, SPEC, rounds=4)
    auto = autotune_config(SPEC)
    assert [c for c, _ in worker.calls] == [pick, auto, auto, pick, pick, auto, auto, pick]
    assert out.order == ["pick,autotune", "autotune,pick"] * 2
    assert all(p == COMPARE_PROTOCOL.as_kwargs() for _, p in worker.calls)
    # each round's drift favours the one measured first; alternating, it cancels to first order
    assert out.vs_autotune == pytest.approx(1.8, rel=0.01)
    assert out.low < 1.8 < out.high and out.high / out.low < 1.1
    assert len(out.pick_rows_per_s) == len(out.autotune_rows_per_s) == 4 and out.failed_rounds == 0


def test_a_round_that_failed_is_left_out_and_all_failed_is_an_error_not_a_ratio():
    worker = DriftingWorker(pick_x=150.0, drift=0.0, fail=(1,))
    out = compare_with_autotune(_measure(worker), SPACE.initial(), SPEC, rounds=3)
    assert out.failed_rounds == 1 and len(out.pick_rows_per_s) == 2 and out.vs_autotune == pytest.approx(1.5)
    none = compare_with_autotune(_measure(DriftingWorker(150.0, fail=(0, 3))), SPACE.initial(), SPEC, rounds=2)
    assert none.vs_autotune is None and none.low is None and "no round where both ran" in none.error


def test_tune_pipeline_reports_vs_autotune_measured_in_its_own_worker():
    worker = DriftingWorker(pick_x=130.0, drift=0.01)
    out = tune_pipeline(IngestJob.create(SPEC, NODE, time_budget_s=600, final=None), "naive",
                        TuningOptions(worker=worker, progress=False, autotune_rounds=3))
    trials = out.search["trials"]
    assert len(worker.calls) == trials + 6  # the search, then three rounds of two
    versus = out.to_json()["vs_autotune"]
    assert versus["vs_autotune"] == pytest.approx(1.3, rel=0.01) and versus["autotune_config"] == autotune_config(SPEC)
    assert versus["low"] <= versus["vs_autotune"] <= versus["high"]
    # AUTOTUNE itself, or no rounds asked for: nothing to compare
    assert tune_pipeline(IngestJob.create(SPEC, NODE, time_budget_s=600, final=None), "autotune",
                         TuningOptions(worker=DriftingWorker(1.0), progress=False, autotune_rounds=3)).vs_autotune is None
    assert tune_pipeline(IngestJob.create(SPEC, NODE, time_budget_s=600, final=None), "naive",
                         TuningOptions(worker=DriftingWorker(1.0), progress=False)).vs_autotune is None


def test_paired_ratio_interval_widens_with_disagreeing_pairs_and_rejects_unequal_samples():
    tight = paired_ratio([2.0, 2.02, 1.98, 2.0], [1.0, 1.0, 1.0, 1.0])
    loose = paired_ratio([2.6, 1.5, 2.4, 1.6], [1.0, 1.0, 1.0, 1.0])
    assert tight.excludes(1.0) and tight.high - tight.low < loose.high - loose.low
    assert paired_ratio([1.1, 0.9, 1.0], [1.0, 1.0, 1.0]).excludes(1.0) is False
    with pytest.raises(ValueError, match="equally long"):
        paired_ratio([1.0], [1.0, 2.0])


def test_a_racing_optimizer_s_race_is_kept_in_the_result_and_others_have_none():
    from optimizers.baselines._fixed import FixedConfigs

    class Racing(FixedConfigs):
        def report(self):
            return {"race": {"rounds": 3, "entrants": 2, "decided_by": "median of the rounds",
                             "buffers_memory_bound": {"prefetch_buffer": 1}}}

    job = lambda: IngestJob.create(SPEC, NODE, time_budget_s=600, final=None)  # noqa: E731
    out = tune_pipeline(job(), Racing("racing", [SPACE.initial()]), TuningOptions(worker=DriftingWorker(1.0), progress=False))
    assert out.search["race"]["buffers_memory_bound"] == {"prefetch_buffer": 1}
    plain = tune_pipeline(job(), "naive", TuningOptions(worker=DriftingWorker(1.0), progress=False))
    assert "race" not in plain.search
