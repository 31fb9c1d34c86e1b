"""Faults in ingestion tuning: a measurement worker that hangs or is killed fails that trial
and the search goes on; a corrupt TFRecord shard and malformed TSV rows are counted and
reported, never silently dropped."""

from __future__ import annotations

import json
import os
import signal
import time
from pathlib import Path
from types import SimpleNamespace

import pytest
import tensorflow as tf

from ingestion import datagen
from ingestion.dlrm import count_bad_rows
from ingestion.knobs import Knob, KnobSpace
from ingestion.measure import MeasureWorker
from ingestion.node import Node
from ingestion.pipeline import PipelineSpec
from optimizers.tuning import IngestJob, MeasureProtocol, TuningOptions, tune_pipeline
from trainwise.cli import main

TINY = MeasureProtocol(warmup_s=0.05, window_s=0.1, repeats=2)
HEALTHY, HANGS, DIES = 0, 1, 2


def faulty_spec() -> PipelineSpec:
    """Squares of a range; knob ``mode`` makes the measuring worker hang (1) or die of SIGKILL (2)."""
    space = KnobSpace((Knob("mode", (HEALTHY, HANGS, DIES)), Knob("batch", (64,), kind="batch")), cpu_budget=1,
                      name="faulty")

    def build(c: dict[str, int]) -> tf.data.Dataset:
        if c["mode"] == HANGS:
            time.sleep(3600)
        if c["mode"] == DIES:
            os.kill(os.getpid(), signal.SIGKILL)
        return tf.data.Dataset.range(10**9).map(lambda x: x * x).batch(c["batch"], drop_remainder=True)

    return PipelineSpec("faulty", build, space, rows_per_element=lambda c: c["batch"],
                        factory="tests.ingestion.test_measure_faults:faulty_spec")


@pytest.fixture
def importable_tests(monkeypatch: pytest.MonkeyPatch) -> None:
    """The worker subprocess imports this module to rebuild the spec."""
    here = str(Path(__file__).resolve().parents[2])  # the checkout: ``tests`` is a package in it
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join(filter(None, [here, os.environ.get("PYTHONPATH")])))


@pytest.mark.slow  # four worker start-ups, each importing TensorFlow
def test_a_hung_or_killed_worker_fails_its_trial_and_the_search_goes_on(importable_tests: None) -> None:
    spec = faulty_spec()
    with MeasureWorker(spec, hang_margin_s=_hang_margin(spec)) as worker:
        job = IngestJob.create(spec, Node("t", 1, 4), time_budget_s=600, search=TINY, final=TINY)
        result = tune_pipeline(job, "grid", TuningOptions(worker=worker, progress=False)).to_json()
        assert worker.restarts == 2  # a fresh worker after the hang and after the kill
        # a worker that answers garbage fails that measurement only, and is replaced
        worker._proc.stdout = _Lines(["not json\n"])
        bad = worker.measure({"mode": HEALTHY, "batch": 64}, **TINY.as_kwargs())
        assert bad.failed and bad.extra["failure"].startswith("worker answered garbage")
        again = worker.measure({"mode": HEALTHY, "batch": 64}, **TINY.as_kwargs())
        assert not again.failed and worker.restarts == 3
    history = {t["config"]["mode"]: t for t in result["search"]["history"]}
    assert sorted(history) == [HEALTHY, HANGS, DIES]  # every configuration was tried
    assert history[HANGS]["oom"] and history[HANGS]["failure"] == "timeout"
    assert history[DIES]["oom"] and history[DIES]["failure"] == f"worker exit {-signal.SIGKILL}"
    assert result["search"]["failed_trials"] == {"timeout": 1, f"worker exit {-signal.SIGKILL}": 1}
    assert result["config"]["mode"] == HEALTHY and result["rows_per_s"] > 0  # the healthy one wins


def _hang_margin(spec: PipelineSpec) -> float:
    """A hang margin far above what a freshly started worker needs for one healthy measurement
    (measured here, on this machine), so only the configuration that hangs times out."""
    started = time.monotonic()
    with MeasureWorker(spec) as fresh:
        assert not fresh.measure({"mode": HEALTHY, "batch": 64}, **TINY.as_kwargs()).failed
    return max(10.0, 5.0 * (time.monotonic() - started))


class _Lines:
    """Stands in for the worker's text pipe."""

    def __init__(self, lines: list[str]) -> None:
        self.lines = lines

    def readline(self) -> str:
        return self.lines.pop(0) if self.lines else ""


def _corrupt(path: Path, how: str) -> None:
    data = bytearray(path.read_bytes())
    if how == "flip":
        middle = len(data) // 2
        data[middle:middle + 8] = bytes(b ^ 0xFF for b in data[middle:middle + 8])
    else:  # truncate mid-record
        data = data[: len(data) // 2 + 3]
    path.write_bytes(bytes(data))


@pytest.mark.parametrize("how", ["flip", "truncate"])
def test_a_corrupt_tfrecord_shard_is_found_and_named(tmp_path: Path, how: str) -> None:
    datagen.generate(1_000, "tfrecord", tmp_path / "d", shards=2)
    shards = sorted((tmp_path / "d").glob("*.tfrecord"))
    clean = count_bad_rows(tmp_path / "d")
    assert clean["rows"] == 1_000 and clean["corrupt_files"] == []
    _corrupt(shards[1], how)
    report = count_bad_rows(tmp_path / "d")
    assert [c["file"] for c in report["corrupt_files"]] == [str(shards[1])]
    assert 0 <= report["corrupt_files"][0]["record"] < 500 and report["rows"] < 1_000
    # the CLI refuses the data with a one-line error naming the shard; no result file
    out = tmp_path / "r.json"
    for policy in ("error", "skip"):
        code = main(["ingest", "tune", "--data", str(tmp_path / "d"), "--optimizer", "grid", "--on-bad-row", policy,
                     "--json-out", str(out)])
        assert code == 2 and not out.exists()


def test_malformed_tsv_rows_are_counted_and_reported(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                     capsys: pytest.CaptureFixture[str]) -> None:
    datagen.generate(1_000, "tsv", tmp_path / "d", shards=2)
    shard = sorted((tmp_path / "d").glob("*.tsv"))[0]
    with open(shard, "a") as fh:
        fh.write("not\ta\trow\n\n1\t2\n")
    out = tmp_path / "r.json"
    assert main(["ingest", "tune", "--data", str(tmp_path / "d"), "--optimizer", "grid", "--json-out", str(out)]) == 2
    assert "3 malformed row(s)" in capsys.readouterr().err and not out.exists()

    import optimizers.tuning

    found = {"rows_per_s": 1.0, "peak_rss_mb": 1.0, "tuning_s": 0.0, "config": {}}
    monkeypatch.setattr(optimizers.tuning, "tune_pipeline", lambda *a, **k: SimpleNamespace(to_json=lambda: dict(found)))
    assert main(["ingest", "tune", "--data", str(tmp_path / "d"), "--optimizer", "grid", "--on-bad-row", "skip",
                 "--json-out", str(out)]) == 0
    result = json.loads(out.read_text())
    assert result["bad_rows"] == 3 and result["rows_checked"] == 1_003 and result["on_bad_row"] == "skip"
    assert "skipping 3 malformed row(s)" in capsys.readouterr().err
