"""The node agent: starts and stops tf.data service workers on an ingestion node, on request.

    trainwise ingest node-agent --listen 10.0.1.7:5040 [--cpus 0-3] [--worker-ports 5060-5099]

A plan gives a job units on nodes; each job has its own dispatcher on the machine running
trainwise, so each node needs a worker per job it serves, registered with that job's dispatcher.
The agent starts them: JSON over HTTP (stdlib ``http.server``), one small protocol, no pickle.

* ``GET /v1/node``: ``{"cpus": [...], "workers": {ID: {...}}}``, the CPUs the agent offers and
  its workers.
* ``POST /v1/workers`` with ``{"dispatcher": "HOST:PORT", "cpus": [0, 1]}``: starts
  ``python -m ingestion.cluster.worker`` pinned to those CPUs (a subset of the agent's), on the
  first free port of ``--worker-ports``, registering with that dispatcher; answers ``{"id": ...,
  "address": "IP:PORT"}``. The worker ends with the agent. The pipeline is not part of the
  request: the tf.data service sends each job's dataset graph to its workers (the files it
  reads must exist at the same paths on the node).
* ``GET /v1/workers/ID``: ``{"alive": bool, "returncode": ...}``; ``DELETE /v1/workers/ID``
  stops one worker, ``DELETE /v1/workers`` all of them.

Every request is validated into a frozen dataclass (:class:`WorkerRequest`): unknown fields,
wrong types, a malformed address or CPUs the agent does not offer are a 400 with one line. A
worker's address is ``--advertise`` (default: the address the request reached the agent at) and
its port.

**Security.** The agent starts processes for whoever reaches it, so the network is its boundary:
bind it to the node's private address and allow its port only from the dispatcher's security
group (the ``ec2_nodes`` Terraform module does both). When the ``TRAINWISE_AGENT_TOKEN``
environment variable is set, every request must also carry ``Authorization: Bearer <token>``
(compared in constant time); :class:`AgentClient` sends the same variable's value.
"""

from __future__ import annotations

import hmac
import http.client
import json
import os
import re
import socket
import subprocess
import threading
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Sequence

from core.errors import UserError
from ingestion.cluster.service import start_worker

TOKEN_ENV = "TRAINWISE_AGENT_TOKEN"
DEFAULT_PORT = 5040
DEFAULT_WORKER_PORTS = (5060, 5099)
MAX_BODY = 4096
TIMEOUT_S = 10.0
_HOST = re.compile(r"^[A-Za-z0-9]([A-Za-z0-9.-]{0,251}[A-Za-z0-9])?$")


def parse_address(text: str, what: str) -> tuple[str, int]:
    """``HOST:PORT`` (a host name or IPv4 address, a port 1-65535); ValueError names ``what``."""
    host, sep, port = text.strip().rpartition(":")
    if not sep or not _HOST.match(host) or not port.isdigit() or not 1 <= int(port) <= 65535:
        raise ValueError(f"{what} must be HOST:PORT (a host name or IPv4 address, a port 1-65535), got {text!r}")
    return host, int(port)


def parse_range(text: str, what: str) -> tuple[int, int]:
    """``A-B`` (or ``A``) of non-negative integers with A <= B; ValueError names ``what``."""
    low, _, high = text.strip().partition("-")
    if not low.isdigit() or not (high or low).isdigit() or int(low) > int(high or low):
        raise ValueError(f"{what} must be A-B with A <= B (e.g. 5060-5099), got {text!r}")
    return int(low), int(high or low)


@dataclass(frozen=True)
class WorkerRequest:
    """Start a worker registering with ``dispatcher`` (HOST:PORT), pinned to ``cpus``."""

    dispatcher: str
    cpus: tuple[int, ...]

    @staticmethod
    def from_json(payload: Any, offered: Sequence[int]) -> "WorkerRequest":
        """Validate a request body; ValueError (one line) on anything else than what the protocol allows."""
        if not isinstance(payload, dict) or set(payload) != {"dispatcher", "cpus"}:
            got = sorted(payload) if isinstance(payload, dict) else type(payload).__name__
            raise ValueError(f"a worker request is an object with exactly 'dispatcher' and 'cpus', got {got}")
        dispatcher, cpus = payload["dispatcher"], payload["cpus"]
        if not isinstance(dispatcher, str):
            raise ValueError("dispatcher must be a string HOST:PORT")
        parse_address(dispatcher, "dispatcher")
        if (not isinstance(cpus, list) or not cpus or len(set(cpus)) != len(cpus)
                or not all(type(c) is int and c in offered for c in cpus)):
            raise ValueError(f"cpus must be a non-empty list of distinct CPU ids among {sorted(offered)}, got {cpus!r}")
        return WorkerRequest(dispatcher, tuple(cpus))


def _port_free(port: int) -> bool:
    with socket.socket() as s:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            s.bind(("0.0.0.0", port))
        except OSError:
            return False
        return True


def free_port_in(ports: tuple[int, int], taken: Sequence[int] = ()) -> int:
    """The first port of the range that nothing listens on; RuntimeError when none is."""
    for port in range(ports[0], ports[1] + 1):
        if port not in taken and _port_free(port):
            return port
    raise RuntimeError(f"no free port in {ports[0]}-{ports[1]}")


@dataclass
class Agent:
    """The agent's state: the CPUs it offers, the worker ports it may use, its workers."""

    cpus: tuple[int, ...]
    worker_ports: tuple[int, int]
    advertise: str | None = None
    workers: dict[str, tuple[WorkerRequest, int, subprocess.Popen]] = field(default_factory=dict)
    _lock: threading.Lock = field(default_factory=threading.Lock)
    _next: int = 0

    def node(self) -> dict[str, Any]:
        with self._lock:
            return {"cpus": list(self.cpus), "workers": {i: {"dispatcher": r.dispatcher, "cpus": list(r.cpus),
                                                            "port": port, "alive": p.poll() is None}
                                                        for i, (r, port, p) in self.workers.items()}}

    def start(self, request: WorkerRequest, reached_at: str) -> dict[str, Any]:
        with self._lock:
            port = free_port_in(self.worker_ports, [port for _, port, p in self.workers.values() if p.poll() is None])
            address = f"{self.advertise or reached_at}:{port}"
            self._next += 1
            worker_id = f"w{self._next}"
            self.workers[worker_id] = (request, port, start_worker(request.dispatcher, request.cpus, port, address))
        return {"id": worker_id, "address": address}

    def status(self, worker_id: str) -> dict[str, Any] | None:
        with self._lock:
            entry = self.workers.get(worker_id)
        return None if entry is None else {"alive": entry[2].poll() is None, "returncode": entry[2].poll()}

    def stop(self, worker_ids: Sequence[str] | None = None) -> list[str]:
        """Stop these workers (None: all); the ids stopped."""
        with self._lock:
            ids = [i for i in (self.workers if worker_ids is None else worker_ids) if i in self.workers]
            procs = [self.workers.pop(i)[2] for i in ids]
        for p in procs:
            if p.poll() is None:
                p.kill()
                p.wait()
        return ids


class _Handler(BaseHTTPRequestHandler):
    """The protocol (module docstring); each request is logged on stderr (the service's journal)."""

    agent: Agent
    token: str | None

    def _reply(self, status: int, body: dict[str, Any]) -> None:
        data = json.dumps(body).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def _authorized(self) -> bool:
        if not self.token:
            return True
        given = self.headers.get("Authorization", "")
        if hmac.compare_digest(given.encode(), f"Bearer {self.token}".encode()):
            return True
        self._reply(401, {"error": f"missing or wrong bearer token ({TOKEN_ENV})"})
        return False

    def _body(self) -> Any:
        length = self.headers.get("Content-Length", "")
        if not length.isdigit() or int(length) > MAX_BODY:
            raise ValueError(f"a request body needs a Content-Length of at most {MAX_BODY} bytes")
        try:
            return json.loads(self.rfile.read(int(length)))
        except (UnicodeDecodeError, json.JSONDecodeError):
            raise ValueError("the request body is not JSON") from None

    def _worker_id(self) -> str | None:
        return self.path.removeprefix("/v1/workers/") if self.path.startswith("/v1/workers/") else None

    def _not_found(self) -> None:
        self._reply(404, {"error": f"no such resource {self.path}"})

    def do_GET(self) -> None:  # noqa: N802  http.server's name
        if not self._authorized():
            return
        worker = self._worker_id()
        answer = self.agent.node() if self.path == "/v1/node" else self.agent.status(worker) if worker else None
        if answer is None:
            return self._not_found()
        self._reply(200, answer)

    def do_POST(self) -> None:  # noqa: N802
        if not self._authorized():
            return
        if self.path != "/v1/workers":
            return self._not_found()
        try:
            request = WorkerRequest.from_json(self._body(), self.agent.cpus)
        except ValueError as exc:
            return self._reply(400, {"error": str(exc)})
        try:
            self._reply(201, self.agent.start(request, self.connection.getsockname()[0]))
        except RuntimeError as exc:
            self._reply(503, {"error": str(exc)})

    def do_DELETE(self) -> None:  # noqa: N802
        if not self._authorized():
            return
        if self.path == "/v1/workers":
            return self._reply(200, {"stopped": self.agent.stop()})
        worker = self._worker_id()
        stopped = self.agent.stop([worker]) if worker else []
        if not stopped:
            return self._not_found()
        self._reply(200, {"stopped": stopped})


def agent_cpus(text: str | None) -> tuple[int, ...]:
    """The CPUs the agent offers: ``--cpus`` (``0-3`` or ``0,2``), a subset of this process's; default all."""
    mine = sorted(os.sched_getaffinity(0))
    if text is None:
        return tuple(mine)
    cpus: set[int] = set()
    for part in text.split(","):
        try:
            low, high = parse_range(part, "--cpus")
        except ValueError:
            raise UserError(f"--cpus must be CPU ids or ranges such as 0-3 or 0,2, got {text!r}") from None
        cpus.update(range(low, high + 1))
    if not cpus or not set(cpus) <= set(mine):
        raise UserError(f"--cpus {text!r} names CPUs this process may not use; allowed: {mine}")
    return tuple(sorted(cpus))


def serve(listen: tuple[str, int], agent: Agent, token: str | None = None) -> ThreadingHTTPServer:
    """An HTTP server for ``agent`` bound to ``listen`` (not yet serving: call ``serve_forever``)."""
    handler = type("Handler", (_Handler,), {"agent": agent, "token": token})
    return ThreadingHTTPServer(listen, handler)


class AgentError(UserError):
    """The agent answered with an error (a one-line message naming the agent)."""


@dataclass(frozen=True)
class AgentClient:
    """Talks to one node agent at ``address`` (HOST:PORT)."""

    address: str
    token: str | None = None

    def call(self, method: str, path: str, body: Any = None) -> tuple[Any, str]:
        """The agent's JSON answer and the local address this machine reached it from."""
        host, port = parse_address(self.address, "a node agent's address")
        conn = http.client.HTTPConnection(host, port, timeout=TIMEOUT_S)
        headers = {"Content-Type": "application/json"}
        if self.token:
            headers["Authorization"] = f"Bearer {self.token}"
        try:
            conn.request(method, path, None if body is None else json.dumps(body), headers)
            local = conn.sock.getsockname()[0]
            response = conn.getresponse()
            answer = json.loads(response.read() or b"null")
        except (OSError, json.JSONDecodeError) as exc:
            raise UserError(f"--workers: the node agent at {self.address} is not reachable ({exc})") from None
        finally:
            conn.close()
        if response.status >= 400:
            raise AgentError(f"the node agent at {self.address}: {(answer or {}).get('error', response.status)}")
        return answer, local


@dataclass
class _AgentWorker:
    """A worker an agent started."""

    client: AgentClient
    worker_id: str

    def gone(self) -> str | None:
        status, _ = self.client.call("GET", f"/v1/workers/{self.worker_id}")
        return None if status["alive"] else (f"worker {self.worker_id} on the node agent at {self.client.address} "
                                              f"exited ({status['returncode']}) before registering")

    def stop(self) -> None:
        try:
            self.client.call("DELETE", f"/v1/workers/{self.worker_id}")
        except (AgentError, UserError):
            pass  # already gone, or its agent is: nothing left to stop


@dataclass(frozen=True)
class AgentNodes:
    """Nodes that run the node agent (``ingestion.cluster.live.Nodes``); dispatchers listen on ``dispatcher_ports``."""

    clients: tuple[AgentClient, ...]
    cpus: tuple[tuple[int, ...], ...]
    reach_me_at: tuple[str, ...]
    dispatcher_ports: tuple[int, int]

    @staticmethod
    def connect(addresses: Sequence[str], dispatcher_ports: tuple[int, int]) -> "AgentNodes":
        """Ask every agent for its CPUs (an unreachable one is a UserError naming it)."""
        clients = tuple(AgentClient(a, os.environ.get(TOKEN_ENV) or None) for a in addresses)
        answers = [c.call("GET", "/v1/node") for c in clients]
        return AgentNodes(clients, tuple(tuple(node["cpus"]) for node, _ in answers),
                          tuple(local for _, local in answers), dispatcher_ports)

    @property
    def count(self) -> int:
        return len(self.clients)

    def dispatcher_port(self) -> int:
        try:
            return free_port_in(self.dispatcher_ports)
        except RuntimeError as exc:
            raise UserError(f"--dispatcher-ports: {exc} here for another job's dispatcher (one port per job)") from None

    def start_worker(self, node: int, dispatcher_port: int) -> _AgentWorker:
        client = self.clients[node]
        answer, _ = client.call("POST", "/v1/workers", {"dispatcher": f"{self.reach_me_at[node]}:{dispatcher_port}",
                                                        "cpus": list(self.cpus[node])})
        return _AgentWorker(client, answer["id"])

    def describe(self) -> dict[str, Any]:
        return {"kind": "node agents", "count": self.count, "addresses": [c.address for c in self.clients],
                "cpus": [list(c) for c in self.cpus]}
