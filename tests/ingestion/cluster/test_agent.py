"""The node agent's protocol in this process (workers stood in by `sleep` processes): request
validation, the token, start/status/stop, and the client's one-line errors; then the CLI's bad
input for `ingest cluster --workers` and `ingest node-agent`."""

from __future__ import annotations

import socket
import subprocess
import sys
import threading
from pathlib import Path
from typing import Any, Iterator

import pytest

from core.errors import UserError
from ingestion.cluster import agent as agent_mod
from ingestion.cluster.agent import (Agent, AgentClient, AgentError, AgentNodes, WorkerRequest, agent_cpus,
                                     parse_address, parse_range)
from ingestion.cluster.agent_server import serve
from ingestion.cluster.service import _free_port

JOBS = Path(__file__).resolve().parents[3] / "configs" / "cluster-local.yaml"


@pytest.mark.parametrize("payload, message", [
    ([], "exactly 'dispatcher' and 'cpus'"),
    ({"dispatcher": "h:1"}, "exactly 'dispatcher' and 'cpus'"),
    ({"dispatcher": "h:1", "cpus": [0], "pipeline": "x"}, "exactly 'dispatcher' and 'cpus'"),
    ({"dispatcher": 5, "cpus": [0]}, "dispatcher must be a string"),
    ({"dispatcher": "h", "cpus": [0]}, "dispatcher must be HOST:PORT"),
    ({"dispatcher": "h:70000", "cpus": [0]}, "dispatcher must be HOST:PORT"),
    ({"dispatcher": "h;rm -rf:1", "cpus": [0]}, "dispatcher must be HOST:PORT"),
    ({"dispatcher": "h:1", "cpus": []}, "non-empty list"),
    ({"dispatcher": "h:1", "cpus": [0, 0]}, "distinct"),
    ({"dispatcher": "h:1", "cpus": [3]}, "among [0, 1]"),
    ({"dispatcher": "h:1", "cpus": [True]}, "among [0, 1]"),
    ({"dispatcher": "h:1", "cpus": "0"}, "non-empty list"),
])
def test_a_bad_worker_request_is_refused_with_one_line(payload: Any, message: str) -> None:
    with pytest.raises(ValueError, match=message.replace("[", r"\[").replace("]", r"\]")):
        WorkerRequest.from_json(payload, (0, 1))


def test_a_good_worker_request_is_a_frozen_value() -> None:
    r = WorkerRequest.from_json({"dispatcher": "10.0.1.5:5050", "cpus": [1, 0]}, (0, 1))
    assert r == WorkerRequest("10.0.1.5:5050", (1, 0))
    with pytest.raises(AttributeError):
        r.cpus = (0,)  # type: ignore[misc]


def test_addresses_and_ranges_parse_or_name_what_is_wrong() -> None:
    assert parse_address("node-1.internal:5040", "x") == ("node-1.internal", 5040)
    assert parse_range("5060-5099", "x") == (5060, 5099) and parse_range("7", "x") == (7, 7)
    for bad in ("5099-5060", "a-b", "-1", ""):
        with pytest.raises(ValueError, match="x must be A-B"):
            parse_range(bad, "x")
    with pytest.raises(UserError, match="names CPUs this process may not use"):
        agent_cpus("100000")
    with pytest.raises(UserError, match="--cpus must be CPU ids"):
        agent_cpus("zero")


@pytest.fixture
def served(monkeypatch: pytest.MonkeyPatch) -> Iterator[tuple[Agent, str, list[tuple]]]:
    """An agent on loopback whose 'workers' are sleep processes; yields it, its address and the start calls."""
    calls: list[tuple] = []

    def fake_start(dispatcher: str, cpus: Any, port: int, address: str) -> subprocess.Popen:
        calls.append((dispatcher, tuple(cpus), port, address))
        return subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])

    monkeypatch.setattr(agent_mod, "start_worker", fake_start)
    low = _free_port()
    agent = Agent((0,), (low, low + 1))
    server = serve(("127.0.0.1", 0), agent, token="s3cret")
    thread = server.start()
    try:
        yield agent, server.address, calls
    finally:
        server.stop()
        thread.join(timeout=30)
        agent.stop()


def test_the_agent_starts_reports_and_stops_workers(served: tuple[Agent, str, list[tuple]]) -> None:
    agent, address, calls = served
    client = AgentClient(address, "s3cret")
    node, local = client.call("GET", "/v1/node")
    assert node == {"cpus": [0], "workers": {}} and local == "127.0.0.1"
    started, _ = client.call("POST", "/v1/workers", {"dispatcher": "127.0.0.1:5050", "cpus": [0]})
    port, first = agent.worker_ports[0], started["id"]
    assert started["address"] == f"127.0.0.1:{port}"  # the address the request reached
    assert calls == [("127.0.0.1:5050", (0,), port, f"127.0.0.1:{port}")]
    assert client.call("GET", f"/v1/workers/{first}")[0] == {"alive": True, "returncode": None}
    second, _ = client.call("POST", "/v1/workers", {"dispatcher": "127.0.0.1:5051", "cpus": [0]})
    assert second["address"].endswith(f":{port + 1}")  # the next free port of the range
    with pytest.raises(AgentError, match="no free port"):
        client.call("POST", "/v1/workers", {"dispatcher": "127.0.0.1:5052", "cpus": [0]})
    assert client.call("DELETE", f"/v1/workers/{first}")[0] == {"stopped": [first]}
    assert client.call("GET", f"/v1/workers/{first}")[0] == {"alive": False, "returncode": -9}
    with pytest.raises(AgentError, match="name the job"):
        client.call("DELETE", "/v1/workers")
    assert client.call("DELETE", "/v1/workers?dispatcher=127.0.0.1:5051")[0] == {"stopped": [second["id"]]}
    assert agent.workers == {}
    with pytest.raises(AgentError, match="no such resource /v1/workers/w-0"):
        client.call("GET", "/v1/workers/w-0")


def test_the_agent_refuses_bad_bodies_and_a_missing_token(served: tuple[Agent, str, list[tuple]]) -> None:
    agent, address, calls = served
    with pytest.raises(AgentError, match="missing or wrong bearer token"):
        AgentClient(address).call("GET", "/v1/node")
    with pytest.raises(AgentError, match="missing or wrong bearer token"):
        AgentClient(address, "guess").call("POST", "/v1/workers", {"dispatcher": "h:1", "cpus": [0]})
    with pytest.raises(AgentError, match=f"the node agent at {address}: cpus must be"):
        AgentClient(address, "s3cret").call("POST", "/v1/workers", {"dispatcher": "h:1", "cpus": [1]})
    assert calls == [] and agent.workers == {}


def test_an_unreachable_agent_is_a_user_error_naming_it() -> None:
    port = _free_port()
    with pytest.raises(UserError, match=f"the node agent at 127.0.0.1:{port} is not reachable"):
        AgentNodes.connect([f"127.0.0.1:{port}"], (5050, 5059))


@pytest.mark.parametrize("extra, message", [
    (["--workers", "127.0.0.1:{port}"], "the node agent at 127.0.0.1:{port} is not reachable"),
    (["--workers", "nohost"], "--workers must be HOST:PORT"),
    (["--workers", ","], "--workers needs at least one node agent address"),
    (["--workers", "a:1,a:1"], "names a node agent twice"),
    (["--workers", "a:1", "--dispatcher-ports", "9-1"], "--dispatcher-ports must be A-B"),
    (["--workers", "a:1", "--local-nodes", "1"], "give one"),
    (["--workers", "a:1", "--simulate"], "does not go with --simulate"),
    (["--workers", "a:1", "--static-type", "c7i.large"], "--static-type does not apply to --workers"),
])
def test_cli_workers_bad_input_is_one_line_and_no_json(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                                       extra: list[str], message: str) -> None:
    from trainwise.cli import main

    port = _free_port()
    out = tmp_path / "live.json"
    args = [a.format(port=port) for a in extra]
    assert main(["ingest", "cluster", "--jobs", str(JOBS), *args, "--json-out", str(out)]) == 2
    err = capsys.readouterr().err
    assert message.format(port=port) in err and "Traceback" not in err and len(err.strip().splitlines()) == 1
    assert not out.exists()


@pytest.mark.parametrize("extra, message", [
    (["--listen", "0.0.0.0"], "--listen must be HOST:PORT"),
    (["--worker-ports", "5099-5060"], "--worker-ports must be A-B"),
    (["--cpus", "100000"], "names CPUs this process may not use"),
    (["--advertise", "a b"], "--advertise must be a host name or IPv4 address"),
])
def test_cli_node_agent_bad_input_is_one_line(capsys: pytest.CaptureFixture[str], extra: list[str],
                                              message: str) -> None:
    from trainwise.cli import main

    assert main(["ingest", "node-agent", *extra]) == 2
    err = capsys.readouterr().err
    assert message in err and "Traceback" not in err and len(err.strip().splitlines()) == 1


def test_agent_nodes_start_workers_that_register_with_this_machine(served: tuple[Agent, str, list[tuple]],
                                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    agent, address, calls = served
    monkeypatch.setenv("TRAINWISE_AGENT_TOKEN", "s3cret")
    nodes = AgentNodes.connect([address], (5050, 5059))
    assert nodes.count == 1 and nodes.cpus == ((0,),) and nodes.describe()["addresses"] == [address]
    with socket.socket() as held:  # the one dispatcher port is taken
        held.bind(("0.0.0.0", 0))
        held.listen()
        busy = AgentNodes(nodes.clients, nodes.cpus, nodes.reach_me_at, (held.getsockname()[1],) * 2)
        with pytest.raises(UserError, match="--dispatcher-ports: no free port"):
            busy.dispatcher_port()
    worker = nodes.start_worker(0, 5055)
    assert calls[-1][:2] == ("127.0.0.1:5055", (0,))  # the address this machine reached the agent from
    assert worker.gone() is None
    agent.workers[worker.worker_id].process.kill()
    agent.workers[worker.worker_id].process.wait()
    assert "exited (-9) before registering" in (worker.gone() or "")
    worker.stop()
    worker.stop()  # stopping a stopped worker is a no-op
    assert agent.workers == {}


def test_nodes_of_different_sizes_are_refused() -> None:
    from optimizers.intunex.live import node_size

    assert node_size([[0, 1], [2, 3]]) == 2
    with pytest.raises(UserError, match=r"different CPU counts \[1, 2\]"):
        node_size([[0], [1, 2]])
