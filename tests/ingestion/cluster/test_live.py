"""The live runner on one local node with a tiny dataset: a job's capacity and its paced trainer's
delivered rows/s, both measured through a real tf.data service worker."""

from __future__ import annotations

import pytest

pytestmark = pytest.mark.slow  # one TensorFlow worker process starts (tens of seconds on a busy machine)


def test_one_node_reads_capacity_and_a_paced_trainer_gets_its_demand() -> None:
    import os

    import tensorflow as tf

    from ingestion.cluster.live import LocalNodes, place, run_on_nodes

    cpu = sorted(os.sched_getaffinity(0))[0]
    # four splits (the source's elements, as a pipeline's files are), each an endless run of cheap 100-row batches
    ds = tf.data.Dataset.range(4).interleave(lambda _: tf.data.Dataset.range(10**9).batch(100), cycle_length=1)
    readings = run_on_nodes({"a": ds, "idle": ds}, place({"a": [1.0]}, 1), LocalNodes(((cpu,),)), {"a": 2000.0, "idle": 1.0},
                                  seconds=2.0)
    assert readings["idle"].capacity_rows_per_s == 0.0 and readings["idle"].delivered_rows_per_s == 0.0
    a = readings["a"]
    # the paced trainer gets its demand, and the capacity is read unpaced: above what the trainer took
    assert a.delivered_rows_per_s == pytest.approx(2000.0, rel=0.1)
    assert a.capacity_rows_per_s > a.delivered_rows_per_s


def test_a_trainer_reads_its_job_through_the_service_and_its_wait_is_measured() -> None:
    import os

    import tensorflow as tf

    from ingestion.cluster.live import LocalNodes, place, run_on_nodes

    cpu = sorted(os.sched_getaffinity(0))[0]
    ds = tf.data.Dataset.range(4).interleave(
        lambda _: tf.data.Dataset.range(10**9).batch(100).map(lambda x: {"label": tf.cast(x, tf.float32)}),
        cycle_length=1)
    seen: list[int] = []
    readings = run_on_nodes({"a": ds, "b": ds}, place({"a": [0.5], "b": [0.5]}, 1), LocalNodes(((cpu,),)),
                            {"a": 2000.0, "b": 2000.0}, seconds=2.0, trainers={"a": lambda batch: seen.append(len(batch["label"]))})
    a, b = readings["a"], readings["b"]
    assert b.trainer is None and b.delivered_rows_per_s == pytest.approx(2000.0, rel=0.1)  # b: the paced reader
    t = a.trainer  # a: its trainer took NumPy batches through the service, as fast as it stepped
    assert t is not None and t.steps > 0 and t.rows == 100 * t.steps and set(seen) == {100}
    assert dict(t.rows_by_source) == {"a": t.rows} and a.delivered_rows_per_s == pytest.approx(t.rows_per_s)
    assert 0.0 <= t.input_wait_share <= 1.0 and t.compute_rows_per_s >= t.rows_per_s
