"""The tf.data service runner: two worker processes on loopback, one killed mid-run; the job
finishes on the other, and every delivered row is counted once (distributed epoch)."""

from __future__ import annotations

import pytest

pytestmark = pytest.mark.slow  # two TensorFlow worker processes start (tens of seconds on a busy machine)


def test_killed_worker_job_goes_on_and_no_row_twice() -> None:
    import tensorflow as tf

    from ingestion.cluster.service import LocalService, read

    elements, per = 400, 250
    ds = tf.data.Dataset.range(elements).map(lambda i: tf.range(i * per, (i + 1) * per))
    killed_at: list[int] = []
    with LocalService(workers=[[0], [1 % max(1, len(__import__("os").sched_getaffinity(0)))]]) as service:
        service.wait_ready()

        def kill(count: int) -> None:
            if count == 100 and not killed_at:
                service.kill_worker(0)
                killed_at.append(count)

        result = read(ds, service, "kill-test", keep=lambda e: e.numpy().tolist(), on_element=kill, idle_timeout_s=10.0)
    ids = [i for chunk in result.values for i in chunk]
    assert killed_at == [100]
    assert result.elements > 100  # rows kept coming after the worker died
    assert result.rows == len(ids) and len(ids) == len(set(ids))  # counted, none twice
    assert set(ids) <= set(range(elements * per))
