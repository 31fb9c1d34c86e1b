"""The suite's pipelines: each builds from its own generated data, yields rows for a
configuration, has a simulator model of its knobs' structure, and a configuration tf.data
rejects fails with a clean error (live) and as a failed measurement (simulated)."""

from __future__ import annotations

import pytest

from ingestion.pipelines import HELD_OUT, NAMES, SUITE, member, members, suite_node
from ingestion.pipelines._common import MARKER
from core.errors import UserError

NODE = suite_node(2)
SMALL = {"dlrm-tsv": {"rows": 2_000}, "wide-tfrecord": {"rows": 200}, "rowmap-csv": {"rows": 400},
         "clicks-csv": {"rows": 800}, "text-hash": {"rows": 300}, "shuffle-heavy": {"rows": 200}}


def test_the_suite_has_six_shapes_with_train_and_held_out_members():
    assert len(SUITE) >= 6 and len(set(NAMES)) == len(NAMES)
    assert members("train") and members("heldout") and set(members()) == set(SUITE)
    assert {m.name for m in members("heldout")} == set(HELD_OUT)
    assert "dlrm-tsv" in NAMES


@pytest.mark.parametrize("name", NAMES)
def test_model_matches_the_space(name):
    m = member(name)
    space = m.space(NODE)
    model = m.model(space)
    knobs = {s.threads_knob for s in model.stages if s.threads_knob} | {s.buffer_knob for s in model.stages if s.buffer_knob}
    assert knobs <= set(space.names)
    assert {k.name for k in space.cpu_knobs} == {s.threads_knob for s in model.stages if s.threads_knob}
    ok = [c for c in space.grid() if not m.simulate(model, c, NODE).failed]
    assert ok and space.initial() in ok


def test_simulated_rejections_and_memory_failures_are_failed_measurements():
    clicks = member("clicks-csv")
    space = clicks.space(NODE)
    bad = {**space.initial(), "cycle": 1, "read": 2}
    m = clicks.simulate(clicks.model(space), bad, NODE)
    assert m.failed and "cycle_length" in m.extra["failure"]
    heavy = member("shuffle-heavy")
    space = heavy.space(NODE)
    big = {**space.initial(), "shuffle_buffer": max(space.knob("shuffle_buffer").values)}
    m = heavy.simulate(heavy.model(space), big, NODE)
    assert m.failed and m.extra["failure"] == "memory limit"


def test_unknown_member_is_a_user_error():
    with pytest.raises(UserError, match="allowed"):
        member("nope")


def test_missing_data_is_a_one_line_user_error(tmp_path):
    with pytest.raises(UserError, match="no \\*.csv files"):
        member("clicks-csv").spec(tmp_path / "empty", NODE)


@pytest.fixture(scope="module")
def data(tmp_path_factory):
    root = tmp_path_factory.mktemp("suite")
    return {m.name: m.generate(root / m.name, 0, **SMALL[m.name]) for m in SUITE}


@pytest.mark.parametrize("name", NAMES)
def test_builds_and_yields_rows(name, data):
    from ingestion.measure import _element_rows

    m = member(name)
    assert (data[name] / MARKER).is_file()
    spec = m.spec(data[name], NODE)
    assert spec.portable and spec.space.names == m.space(NODE).names
    for config in (spec.space.initial(), max(spec.space.grid(), key=spec.space.cpu_used)):
        if m.rejects(config) is not None:
            continue
        it = iter(spec.build(config))
        rows = [_element_rows(next(it)) for _ in range(2)]
        assert rows[0] > 0 and (spec.rows_in(config) in (None, rows[0]))


def test_tf_data_rejects_read_above_cycle_cleanly(data):
    import tensorflow as tf  # a dependency: a broken install fails here rather than skipping

    m = member("clicks-csv")
    spec = m.spec(data["clicks-csv"], NODE)
    bad = {**spec.space.initial(), "cycle": 1, "read": 2}
    assert spec.space.is_valid(bad) and m.rejects(bad)  # inside the space, yet tf.data refuses it
    with pytest.raises(tf.errors.InvalidArgumentError, match="cycle_length"):
        next(iter(spec.build(bad)))
