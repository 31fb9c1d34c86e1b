"""A job's demand from its trainer: user trainers load or fail in one line, the demand is the
median window's rows/s with the margin, ``measure`` in a jobs file is resolved once per trainer,
and the CLI refuses a bad or crashing trainer with exit 2 and no result file."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from core.errors import UserError
from ingestion.cluster.jobs import parse_jobs
from ingestion.cluster.trainer import Demand, load_trainer, measure_demand, resolve_demands, synthetic_batches

TRAINERS = '''
import time
def make_step():
    def step(batch):
        assert batch["dense"].shape[1] == 13 and batch["cat"].shape[1] == 26
        time.sleep(0.002)
    return step
def make_crashing():
    def step(batch):
        raise ValueError("shapes do not match")
    return step
def not_a_factory():
    return 42
'''


@pytest.fixture
def user_module(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> str:
    (tmp_path / "my_trainers.py").write_text(TRAINERS)
    monkeypatch.syspath_prepend(str(tmp_path))
    return "my_trainers"


def test_bad_trainers_are_one_line_user_errors(user_module: str) -> None:
    for name, message in (("nosuch_module_x:f", "cannot import 'nosuch_module_x'"), ("my_trainers", "module:function"),
                          (f"{user_module}:missing", "has no function 'missing'"),
                          (f"{user_module}:not_a_factory", "must return a step function")):
        with pytest.raises(UserError, match=message):
            load_trainer(name)
    with pytest.raises(UserError, match="crashed on a batch of 64 rows .ValueError: shapes do not match"):
        measure_demand(f"{user_module}:make_crashing", batch_size=64, seconds=0.05, repeats=2)


def test_the_demand_is_the_median_window_with_the_margin(user_module: str) -> None:
    d = measure_demand(f"{user_module}:make_step", batch_size=64, seconds=0.1, repeats=3, margin=0.1)
    assert len(d.windows_rows_per_s) == 3 and d.label == "measured"
    assert d.compute_rows_per_s == sorted(d.windows_rows_per_s)[1]
    assert d.demand_rows_per_s == pytest.approx(1.1 * d.compute_rows_per_s) and d.spread >= 0
    batch = synthetic_batches(32, count=1)[0]
    assert batch["dense"].dtype.name == "float32" and batch["cat"].dtype.name == "int64" and batch["label"].shape == (32,)


def test_measure_in_a_jobs_file_is_resolved_once_per_trainer() -> None:
    spec = parse_jobs({"jobs": [{"name": "a", "demand_rows_per_s": "measure"}, {"name": "b", "demand_rows_per_s": "measure"},
                                {"name": "c", "demand_rows_per_s": 7.0}]})
    calls = []

    def fake(name: str) -> Demand:
        calls.append(name)
        return Demand(name, 1050.0, 1000.0, (990.0, 1000.0, 1010.0), 0.01, 0.05, 1024)

    resolved, measured = resolve_demands(spec, fake)
    assert [j.demand_rows_per_s for j in resolved.jobs] == [1050.0, 1050.0, 7.0]
    assert calls == ["dlrm"] and set(measured) == {"a", "b"}
    with pytest.raises(UserError, match=r"jobs\[0\]\.demand_rows_per_s: must be a number of rows/s or 'measure', got 'fast'"):
        parse_jobs({"jobs": [{"name": "a", "demand_rows_per_s": "fast"}]})


def test_cli_bad_and_crashing_trainers_exit_2_in_one_line(user_module: str, tmp_path: Path,
                                                           capsys: pytest.CaptureFixture[str]) -> None:
    from trainwise.cli import main

    out = tmp_path / "d.json"
    for trainer, message in (("nosuch_module_x:f", "cannot import"), (f"{user_module}:make_crashing", "crashed")):
        assert main(["ingest", "trainer-demand", "--trainer", trainer, "--seconds", "0.05", "--json-out", str(out)]) == 2
        err = capsys.readouterr().err
        assert message in err and "Traceback" not in err and len(err.strip().splitlines()) == 1
        assert not out.exists()
    assert main(["ingest", "trainer-demand", "--trainer", f"{user_module}:make_step", "--seconds", "0.1",
                 "--batch-size", "64", "--json-out", str(out)]) == 0
    d = json.loads(out.read_text())
    printed = capsys.readouterr().out.strip().splitlines()
    assert printed == [f"{d['demand_rows_per_s']:.0f}"] and d["label"] == "measured"


class _Clock:
    """A clock that moves only when told: the source and the step advance it by fixed amounts."""

    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def test_a_trainer_on_a_source_splits_its_step_time_into_input_wait_and_compute(monkeypatch: pytest.MonkeyPatch) -> None:
    from ingestion.cluster import trainer as module
    from ingestion.cluster.trainer import train_on

    clock = _Clock()
    monkeypatch.setattr(module.time, "perf_counter", clock)
    batches = iter([("a", 0.3), ("b", 0.3), ("a", 0.3), ("a", 0.3), ("b", 0.3)])

    def next_batch() -> tuple[str, dict] | None:
        source, wait = next(batches, (None, 0.0))
        clock.now += wait  # the trainer waits this long for the batch
        return None if source is None else (source, {"label": np.zeros(10, np.float32)})

    def step(batch: dict) -> None:
        clock.now += 0.1  # and computes this long on it

    # the first step falls in the warm-up; the input ends after five batches
    r = train_on(next_batch, step, seconds=100.0, warmup_s=0.3, name="fake")
    assert (r.steps, r.rows) == (4, 40) and dict(r.rows_by_source) == {"a": 20, "b": 20}
    assert r.wait_s == pytest.approx(4 * 0.3) and r.compute_s == pytest.approx(4 * 0.1)  # the end's wait is 0 here
    assert r.input_wait_share == pytest.approx(0.75) and r.compute_rows_per_s == pytest.approx(40 / 0.4)
    assert r.rows_per_s == pytest.approx(40 / 1.6) and r.steps_per_s == pytest.approx(4 / 1.6)
    figures = r.to_json()
    assert figures["label"] == "measured" and figures["input_wait_share"] == pytest.approx(0.75)


def test_a_trainer_that_gets_nothing_waited_all_its_time() -> None:
    from ingestion.cluster.trainer import train_on

    r = train_on(lambda: None, lambda batch: None, seconds=1.0)
    assert (r.steps, r.rows) == (0, 0) and r.input_wait_share == 1.0 and r.compute_rows_per_s == 0.0


def test_a_trainer_that_crashes_on_a_served_batch_is_one_line(user_module: str) -> None:
    from ingestion.cluster.trainer import load_trainer, train_on

    step = load_trainer(f"{user_module}:make_crashing")
    with pytest.raises(UserError, match="trainer ads crashed on a batch of 8 rows"):
        train_on(lambda: ("x", synthetic_batches(8, count=1)[0]), step, seconds=1.0, name="ads")
