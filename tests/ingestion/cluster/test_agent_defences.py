"""The node agent's defences: loopback-only without a token, the dispatcher allow-list, one
worker per offered CPU per job, dead workers reaped, stalled clients dropped, job-scoped stops;
in this process (workers stood in by short Python processes), then the kept hostile client
against a real `trainwise ingest node-agent` on loopback."""

from __future__ import annotations

import ipaddress
import os
import socket
import subprocess
import sys
import time
from pathlib import Path
from typing import Any, Iterator

import pytest

from core.errors import UserError
from ingestion.cluster import agent as agent_mod
from ingestion.cluster.agent import Agent, AgentClient, AgentError, agent_token, parse_dispatchers
from ingestion.cluster.agent_server import check_listen, serve
from ingestion.cluster.service import _free_port

ROOT = Path(__file__).resolve().parents[3]
TOKEN = "t0ken"


@pytest.fixture
def started(monkeypatch: pytest.MonkeyPatch) -> list[tuple[str, tuple[int, ...]]]:
    """The workers the agent starts are sleeping Python processes; the start calls."""
    calls: list[tuple[str, tuple[int, ...]]] = []

    def fake_start(dispatcher: str, cpus: Any, port: int, address: str) -> subprocess.Popen:
        calls.append((dispatcher, tuple(cpus)))
        return subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])

    monkeypatch.setattr(agent_mod, "start_worker", fake_start)
    return calls


def _serve(agent: Agent, stall_s: float = 30.0) -> Iterator[AgentClient]:
    server = serve(("127.0.0.1", 0), agent, TOKEN, stall_s)
    thread = server.start()
    try:
        yield AgentClient(server.address, TOKEN)
    finally:
        server.stop()
        thread.join(timeout=30)
        agent.stop()


@pytest.fixture
def two_cpus(started: list) -> Iterator[tuple[Agent, AgentClient]]:
    low = _free_port()
    agent = Agent((0, 1), (low, low + 5))
    for client in _serve(agent, stall_s=1.0):
        yield agent, client


def test_listening_beyond_loopback_needs_a_token(capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    from trainwise.cli import main

    monkeypatch.delenv("TRAINWISE_AGENT_TOKEN", raising=False)
    monkeypatch.delenv("TRAINWISE_AGENT_TOKEN_PARAMETER", raising=False)
    for listen in ("0.0.0.0:5040", "10.1.2.3:5040"):
        assert main(["ingest", "node-agent", "--listen", listen]) == 2
        err = capsys.readouterr().err
        assert "beyond loopback: set TRAINWISE_AGENT_TOKEN" in err and len(err.strip().splitlines()) == 1
    check_listen("127.0.0.1", None)  # loopback without a token is fine
    check_listen("localhost", None)
    check_listen("0.0.0.0", "a token")


def test_a_dispatcher_off_the_allow_list_starts_nothing(two_cpus: tuple[Agent, AgentClient], started: list) -> None:
    agent, client = two_cpus
    for dispatcher in ("203.0.113.7:5050", "no-such-host.invalid:5050", "8.8.8.8:443"):
        with pytest.raises(AgentError, match=f"dispatcher {dispatcher} is not on this agent's allow-list"):
            client.call("POST", "/v1/workers", {"dispatcher": dispatcher, "cpus": [0]})
    assert started == [] and agent.workers == {}
    agent.dispatchers = parse_dispatchers("203.0.113.0/24")
    client.call("POST", "/v1/workers", {"dispatcher": "203.0.113.7:5050", "cpus": [0]})
    assert started == [("203.0.113.7:5050", (0,))]


def test_a_dispatcher_named_by_host_name_is_given_to_the_worker_as_the_address_checked(
        two_cpus: tuple[Agent, AgentClient], started: list) -> None:
    agent, client = two_cpus
    client.call("POST", "/v1/workers", {"dispatcher": "localhost:5050", "cpus": [0]})
    assert started == [("127.0.0.1:5050", (0,))]  # not the name: a later lookup cannot move it
    assert [w.request.dispatcher for w in agent.workers.values()] == ["localhost:5050"]  # the job keeps its name


def test_the_default_allow_list_is_loopback_and_the_nodes_own_addresses() -> None:
    nets = parse_dispatchers(None)
    assert ipaddress.ip_address("127.0.0.1") in nets[0] and ipaddress.ip_address("::1") in nets[1]
    assert not any(ipaddress.ip_address("203.0.113.7") in n for n in nets)
    with pytest.raises(UserError, match="--dispatchers must be comma-separated CIDRs"):
        parse_dispatchers("10.0.0.0/16,evil")


def test_at_most_one_worker_per_offered_cpu_per_job(two_cpus: tuple[Agent, AgentClient], started: list) -> None:
    agent, client = two_cpus
    job_a = {"dispatcher": "127.0.0.1:5050", "cpus": [0]}
    client.call("POST", "/v1/workers", job_a)
    client.call("POST", "/v1/workers", job_a)
    with pytest.raises(AgentError, match="already has 2 workers here, one per offered CPU"):
        client.call("POST", "/v1/workers", job_a)
    client.call("POST", "/v1/workers", {"dispatcher": "127.0.0.1:5051", "cpus": [1]})  # another job: its own cap
    assert len(started) == 3 and len(agent.workers) == 3


def test_dead_workers_are_reaped_and_free_their_place(two_cpus: tuple[Agent, AgentClient], started: list) -> None:
    agent, client = two_cpus
    job = {"dispatcher": "127.0.0.1:5050", "cpus": [0]}
    ids = [client.call("POST", "/v1/workers", job)[0]["id"] for _ in range(2)]
    for i in ids:
        agent.workers[i].process.kill()
    deadline = time.monotonic() + 30  # the reaper runs every second; a bound, not a speed bar
    while agent.workers and time.monotonic() < deadline:
        time.sleep(0.1)
    assert agent.workers == {} and all(agent.ended[i] == -9 for i in ids)
    assert client.call("GET", f"/v1/workers/{ids[0]}")[0] == {"alive": False, "returncode": -9}
    client.call("POST", "/v1/workers", job)  # the dead no longer count toward the cap
    client.call("POST", "/v1/workers", job)
    assert len(agent.workers) == 2


@pytest.mark.parametrize("payload", [b"partial-body", b"partial-headers"])
def test_a_client_that_stalls_mid_request_is_dropped(two_cpus: tuple[Agent, AgentClient], started: list, payload: bytes) -> None:
    agent, client = two_cpus
    host, port = client.address.split(":")
    body = b'{"dispatcher": "127.0.0.1:5050", "cpus": [0]}'
    if payload == b"partial-body":
        raw = (f"POST /v1/workers HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer {TOKEN}\r\n"
               f"Content-Length: {len(body) + 40}\r\n\r\n").encode() + body
    else:
        raw = b"GET /v1/node HTTP/1.1\r\nHost: x\r\nX-Slow: "
    with socket.create_connection((host, int(port)), timeout=60) as s:  # 60 s: a bound far above the 1 s stall
        s.sendall(raw)
        assert client.call("GET", "/v1/node")[0]["workers"] == {}  # others are served meanwhile
        assert s.recv(65536) == b""  # closed by the agent, no answer
    assert started == [] and agent.workers == {}


def test_a_job_stops_only_its_own_workers(two_cpus: tuple[Agent, AgentClient], started: list) -> None:
    agent, client = two_cpus
    a = client.call("POST", "/v1/workers", {"dispatcher": "127.0.0.1:5050", "cpus": [0]})[0]["id"]
    b = client.call("POST", "/v1/workers", {"dispatcher": "127.0.0.1:5051", "cpus": [1]})[0]["id"]
    with pytest.raises(AgentError, match="name the job"):
        client.call("DELETE", "/v1/workers")
    assert set(agent.workers) == {a, b}
    assert client.call("DELETE", "/v1/workers?dispatcher=127.0.0.1:5050")[0] == {"stopped": [a]}
    assert set(agent.workers) == {b} and agent.workers[b].alive()


def test_the_token_comes_from_the_environment_or_ssm(moto_env: str, monkeypatch: pytest.MonkeyPatch) -> None:
    import boto3

    boto3.client("ssm", region_name="us-east-1").put_parameter(
        Name="/trainwise/dev/agent-token", Value="from-ssm", Type="SecureString", Overwrite=True)
    monkeypatch.delenv("TRAINWISE_AGENT_TOKEN", raising=False)
    monkeypatch.setenv("TRAINWISE_AGENT_TOKEN_PARAMETER", "/trainwise/dev/agent-token")
    assert agent_token() == "from-ssm"
    monkeypatch.setenv("TRAINWISE_AGENT_TOKEN", "from-env")
    assert agent_token() == "from-env"
    monkeypatch.delenv("TRAINWISE_AGENT_TOKEN")
    monkeypatch.setenv("TRAINWISE_AGENT_TOKEN_PARAMETER", "/trainwise/dev/missing")
    with pytest.raises(UserError, match="cannot read the agent token from SSM"):
        agent_token()


def test_the_hostile_client_finds_no_hole_in_a_real_agent(capsys: pytest.CaptureFixture[str]) -> None:
    from tests.ingestion.cluster.hostile_client import main as hostile

    port, workers = _free_port(), _free_port()
    cpu = sorted(os.sched_getaffinity(0))[0]
    env = {**os.environ, "PYTHONPATH": str(ROOT), "TRAINWISE_AGENT_TOKEN": TOKEN}
    proc = subprocess.Popen([sys.executable, "-m", "trainwise", "ingest", "node-agent", "--listen", f"127.0.0.1:{port}",
                             "--cpus", str(cpu), "--worker-ports", f"{workers}-{workers + 2}", "--stall-s", "2"],
                            env=env, stderr=subprocess.PIPE, text=True)
    try:
        line = proc.stderr.readline()  # type: ignore[union-attr]
        assert line.startswith("node agent on 127.0.0.1:"), line
        failures = hostile(["--agent", f"127.0.0.1:{port}", "--token", TOKEN, "--agent-pid", str(proc.pid),
                            "--stall-s", "2"])
    finally:
        proc.terminate()
        proc.wait(timeout=60)
    out = capsys.readouterr().out
    assert failures == 0, out
    assert out.count("PASS ") == 15, out


def test_the_hostile_client_sees_a_hole(started: list, capsys: pytest.CaptureFixture[str]) -> None:
    """The control: against an agent that takes requests without a token, the checks fail."""
    from tests.ingestion.cluster.hostile_client import main as hostile

    low = _free_port()
    agent = Agent((0,), (low, low + 5))
    server = serve(("127.0.0.1", 0), agent, None, 2.0)
    thread = server.start()
    try:
        failures = hostile(["--agent", server.address, "--token", TOKEN, "--stall-s", "2"])
    finally:
        server.stop()
        thread.join(timeout=30)
        agent.stop()
    out = capsys.readouterr().out
    assert failures >= 2 and "FAIL no token" in out and "FAIL wrong token" in out, out
