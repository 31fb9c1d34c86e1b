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
