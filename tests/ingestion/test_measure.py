"""Measurement (in-process and in the worker subprocess), tuning a user's own pipeline, and the CLI."""

from __future__ import annotations

import json

import pytest

import tensorflow as tf  # noqa: E402  (a missing TensorFlow fails these tests, never skips them)

from ingestion import datagen  # noqa: E402
from ingestion.dlrm import dlrm_spec  # noqa: E402
from ingestion.knobs import Knob, KnobSpace  # noqa: E402
from ingestion.measure import MeasureWorker, measure_in_process  # noqa: E402
from ingestion.node import Node  # noqa: E402
from ingestion.pipeline import PipelineSpec  # noqa: E402
from optimizers.tuning import IngestJob, MeasureProtocol, TuningOptions, tune_pipeline  # noqa: E402
from trainwise.cli import main  # noqa: E402

# windows long enough that a loaded machine still pulls rows in every one of them
TINY = MeasureProtocol(warmup_s=0.2, window_s=0.5, repeats=2)
NODE = {"name": "t", "vcpus": 2, "ram_gib": 4.0, "hourly_usd": 0.0}


def user_pipeline_spec() -> PipelineSpec:
    """A pipeline that is not the DLRM one: squares of a range, batched."""
    space = KnobSpace((Knob("threads", (0, 1, 2), kind="cpu", stage="map"),
                       Knob("batch", (8, 64), kind="batch", stage="batch")), cpu_budget=2, name="squares")

    def build(c):
        ds = tf.data.Dataset.range(10**9).map(lambda x: x * x, num_parallel_calls=c["threads"] or None)
        return ds.batch(c["batch"], drop_remainder=True)

    return PipelineSpec("squares", build, space, rows_per_element=lambda c: c["batch"])


def test_measure_in_process_counts_rows():
    spec = user_pipeline_spec()
    m = measure_in_process(spec, {"threads": 1, "batch": 64}, warmup_s=0.2, window_s=0.5, repeats=3)
    assert m.label == "measured" and m.rows_per_s > 0 and m.peak_rss_mb > 0
    assert len(m.extra["windows_rows_per_s"]) == 3 and m.extra["rows"] % 64 == 0 and m.extra["rows"] > 0
    # the cores this process kept busy over the windows (it pulled rows all along: more than none,
    # and no more than the machine has) and what the rest of the machine kept busy meanwhile
    import os

    assert 0.0 < m.extra["cores_busy"] <= (os.cpu_count() or 1) + 0.5
    other = m.extra["other_cores_busy"]
    assert other is None or 0.0 <= other <= (os.cpu_count() or 1) + 0.5


def test_machine_busy_counts_this_process_work():
    from ingestion.measure import machine_busy_s, process_cpu_s

    before_machine, before_own = machine_busy_s(), process_cpu_s()
    if before_machine is None:
        pytest.skip("no /proc/stat here")
    # burn a fixed amount of this process's CPU time (not of wall time: on a loaded machine a
    # wall-clock window may give this process almost no CPU)
    for _ in range(10_000):
        if process_cpu_s() - before_own >= 0.2:
            break
        sum(range(20_000))
    own = process_cpu_s() - before_own
    machine = machine_busy_s() - before_machine
    assert own >= 0.2 and machine >= own - 0.05  # the machine's busy time includes this process's


@pytest.mark.slow
def test_user_pipeline_is_tuned_by_a_baseline():
    spec = user_pipeline_spec()
    job = IngestJob.create(spec, Node("t", 2, 4), time_budget_s=60, search=TINY, final=TINY)
    r = tune_pipeline(job, "grid", TuningOptions(progress=False)).to_json()
    assert r["search"]["trials"] == spec.space.grid_size() == 6
    assert spec.space.is_valid(r["config"]) and r["rows_per_s"] > 0 and r["label"] == "measured"
    assert all(t["cores_busy"] > 0 for t in r["search"]["history"])  # every trial says what cores it had


@pytest.mark.slow
def test_worker_measures_dlrm_and_reports_memory(tmp_path):
    datagen.generate(400, "tsv", tmp_path / "d", shards=2)
    spec = dlrm_spec(str(tmp_path / "d"), node=NODE, batch_sizes=[32])
    with MeasureWorker(spec, memory_limit_mb=8000) as w:
        m = w.measure(spec.space.initial(), warmup_s=0.2, window_s=0.5, repeats=1, stage_profile=True)
        assert m.rows_per_s > 0 and m.extra["rows"] % 32 == 0
        assert m.peak_rss_mb >= m.extra["rss_before_mb"] > 0  # TF's runtime lives in the worker, not here
        assert set(m.extra["stage_rows_per_s"]) == {"read", "shuffle", "batch", "parse", "transform", "prefetch"}
        assert set(m.extra["stage_cores_busy"]) == set(m.extra["stage_rows_per_s"])
        assert all(c > 0 for c in m.extra["stage_cores_busy"].values())
    # a memory limit below TensorFlow's own footprint: reported as out of memory, not a crash
    with MeasureWorker(spec, memory_limit_mb=50) as w:
        m = w.measure(spec.space.initial(), warmup_s=0.2, window_s=0.5, repeats=1)
        assert m.failed and m.extra["failure"] in ("memory limit", "worker exit 75")


def _run_cli(argv, capsys):
    code = main(argv)
    return code, capsys.readouterr().err


def test_cli_bad_inputs_fail_cleanly(tmp_path, capsys):
    code, err = _run_cli(["ingest", "tune", "--data", str(tmp_path / "nope"), "--optimizer", "intune",
                          "--time-budget-s", "10", "--json-out", str(tmp_path / "r.json")], capsys)
    assert code == 2 and "does not exist" in err and "Traceback" not in err
    assert not (tmp_path / "r.json").exists()
    datagen.generate(20, "tsv", tmp_path / "d", shards=1)
    code, err = _run_cli(["ingest", "tune", "--data", str(tmp_path / "d"), "--optimizer", "naive",
                          "--time-budget-s", "0"], capsys)
    assert code == 2 and "--time-budget-s" in err
    code, err = _run_cli(["ingest", "tune", "--data", str(tmp_path / "d"), "--optimizer", "naive", "--vcpus", "0"], capsys)
    assert code == 2 and "vcpus" in err
    with open(tmp_path / "d" / "part-00000.tsv", "a") as fh:
        fh.write("1\tx\n")
    code, err = _run_cli(["ingest", "tune", "--data", str(tmp_path / "d"), "--optimizer", "naive"], capsys)
    assert code == 2 and "1 malformed row" in err and "part-00000.tsv:21" in err and "--on-bad-row skip" in err
    (tmp_path / "cfg.json").write_text(json.dumps({"config": {"read_parallelism": 0, "bogus": 1}, "data": str(tmp_path / "d")}))
    code, err = _run_cli(["ingest", "bench", "--config", str(tmp_path / "cfg.json"), "--on-bad-row", "skip"], capsys)
    assert code == 2 and "bogus" in err


def test_cli_gen_data_writes_json(tmp_path, capsys):
    code, _ = _run_cli(["ingest", "gen-data", "--rows", "30", "--format", "tsv", "--out", str(tmp_path / "d"),
                        "--json-out", str(tmp_path / "g.json")], capsys)
    assert code == 0
    doc = json.loads((tmp_path / "g.json").read_text())
    assert doc["rows"] == 30 and doc["format"] == "tsv" and "environment" in doc


@pytest.mark.slow
def test_cli_bench_measures_a_config_file(tmp_path, capsys):
    datagen.generate(300, "tfrecord", tmp_path / "d", shards=2)
    config = {"read_parallelism": 1, "cycle_length": 4, "shuffle_buffer": 1024, "batch_size": 16,
              "parse_parallelism": 1, "transform_parallelism": 0, "prefetch_buffer": 1}
    (tmp_path / "c.json").write_text(json.dumps(config))
    code, err = _run_cli(["ingest", "bench", "--config", str(tmp_path / "c.json"), "--data", str(tmp_path / "d"),
                          "--warmup-s", "0.2", "--window-s", "0.5", "--repeats", "2", "--json-out",
                          str(tmp_path / "b.json")], capsys)
    assert code == 0, err
    doc = json.loads((tmp_path / "b.json").read_text())
    assert doc["format"] == "tfrecord" and doc["rows_per_s"] > 0 and doc["peak_rss_mb"] > 0
    assert doc["label"] == "measured" and len(doc["measurement"]["windows_rows_per_s"]) == 2
