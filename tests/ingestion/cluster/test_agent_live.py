"""Two node agents on loopback as a two-node "remote" cluster: a job's workers start through the
agents, register with the job's dispatcher in this process, and deliver rows; stopping the job
leaves the agents without workers."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Iterator

import pytest

from core.errors import UserError
from ingestion.cluster.agent import AgentClient, AgentNodes
from ingestion.cluster.service import _free_port

pytestmark = pytest.mark.slow  # two TensorFlow worker processes start (tens of seconds on a busy machine)
ROOT = Path(__file__).resolve().parents[3]


def _agent(cpu: int) -> tuple[subprocess.Popen, str]:
    port, workers = _free_port(), _free_port()
    proc = subprocess.Popen([sys.executable, "-m", "trainwise", "ingest", "node-agent", "--listen", f"127.0.0.1:{port}",
                             "--cpus", str(cpu), "--worker-ports", f"{workers}-{workers}"],
                            env={**os.environ, "PYTHONPATH": str(ROOT)}, stderr=subprocess.DEVNULL)
    return proc, f"127.0.0.1:{port}"


def _wait_until_answering(address: str, start_up_s: float = 30.0) -> None:
    """Poll a starting agent until it answers; a readiness wait, not a speed bar (an agent that
    never answers fails the fixture with its address)."""
    deadline = time.monotonic() + start_up_s
    while True:
        try:
            AgentClient(address).call("GET", "/v1/node")
            return
        except UserError:
            if time.monotonic() >= deadline:
                pytest.fail(f"the node agent at {address} did not come up")
            time.sleep(0.2)


@pytest.fixture
def agents() -> Iterator[list[str]]:
    cpus = sorted(os.sched_getaffinity(0))
    started = [_agent(cpus[i % len(cpus)]) for i in range(2)]
    try:
        for _, address in started:
            _wait_until_answering(address)
        yield [address for _, address in started]
    finally:
        for proc, _ in started:
            proc.terminate()
            proc.wait()


def test_a_job_runs_on_workers_the_agents_start(agents: list[str]) -> None:
    import tensorflow as tf

    from ingestion.cluster.live import place, run_on_nodes

    low = _free_port()
    nodes = AgentNodes.connect(agents, (low, low + 20))
    assert nodes.count == 2 and all(len(c) == 1 for c in nodes.cpus)
    ds = tf.data.Dataset.range(4).interleave(lambda _: tf.data.Dataset.range(10**9).batch(100), cycle_length=1)
    readings = run_on_nodes({"a": ds}, place({"a": [1.0, 1.0]}, 2), nodes, {"a": 2000.0}, seconds=2.0)
    a = readings["a"]
    # the paced trainer gets its demand, and the capacity is read unpaced: above what the trainer took
    assert a.delivered_rows_per_s == pytest.approx(2000.0, rel=0.1)
    assert a.capacity_rows_per_s > a.delivered_rows_per_s
    for address in agents:
        assert AgentClient(address).call("GET", "/v1/node")[0]["workers"] == {}  # the job's workers are stopped
