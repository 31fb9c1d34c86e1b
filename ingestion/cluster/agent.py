"""The node agent: starts and stops tf.data service workers on an ingestion node, on request.

    trainwise ingest node-agent --listen 10.0.1.7:5040 --dispatchers 10.0.0.0/16 [--cpus 0-3]

A plan gives a job units on nodes; each job has its own dispatcher on the machine running
trainwise, so each node needs a worker per job it serves, registered with that job's dispatcher.
The agent starts them: JSON over HTTP, one small protocol, no pickle, served by uvicorn and
starlette (:mod:`ingestion.cluster.agent_server`).

* ``GET /v1/node``: ``{"cpus": [...], "workers": {ID: {...}}}``, the CPUs the agent offers and
  its live workers.
* ``POST /v1/workers`` with ``{"dispatcher": "HOST:PORT", "cpus": [0, 1]}``: starts
  ``python -m ingestion.cluster.worker`` pinned to those CPUs (a subset of the agent's), on the
  first free port of ``--worker-ports``, registering with that dispatcher; answers ``{"id": ...,
  "address": "IP:PORT"}``. The worker ends with the agent. The pipeline is not part of the
  request: the tf.data service sends each job's dataset graph to its workers (the files it
  reads must exist at the same paths on the node).
* ``GET /v1/workers/ID``: ``{"alive": bool, "returncode": ...}``; ``DELETE /v1/workers/ID``
  stops one worker; ``DELETE /v1/workers?dispatcher=HOST:PORT`` stops the workers of that one
  job (a job is its dispatcher), never another job's.

Every request is validated into a frozen dataclass (:class:`WorkerRequest`): unknown fields,
wrong types, a malformed address or CPUs the agent does not offer are a 400 with one line. A
worker's address is ``--advertise`` (default: the address the request reached the agent at) and
its port.

**Security.** A tf.data worker runs whatever dataset graph its dispatcher sends, so choosing the
dispatcher is choosing the code a worker runs. The agent therefore:

* listens beyond loopback only with a token (``TRAINWISE_AGENT_TOKEN``, or the SSM parameter
  named by ``TRAINWISE_AGENT_TOKEN_PARAMETER``): every request carries ``Authorization: Bearer
  <token>``, compared in constant time (401 otherwise);
* starts workers only for dispatchers inside its allow-list (``--dispatchers``, CIDRs; default
  loopback and the node's own addresses): any other dispatcher is a 403 and no process starts;
* starts at most one worker per offered CPU per job (429 beyond), reaps workers that died (they
  no longer count, and their port is free again), and stops only the workers of the job named;
* drops a client that has not completed its request within ``STALL_S`` seconds (30) of
  connecting or of its last answer, so a client sending less than its Content-Length holds
  nothing; bodies are at most ``MAX_BODY`` bytes (413).

Bind it to the node's private address and allow its port only from the learner's security group
(the ``ec2_nodes`` Terraform module does both, and passes the VPC's CIDR as ``--dispatchers``).
"""

from __future__ import annotations

import hmac
import http.client
import ipaddress
import json
import os
import re
import secrets
import socket
import subprocess
import threading
from dataclasses import dataclass, field
from typing import Any, Iterable, Sequence, TypedDict

from core.errors import UserError
from ingestion.cluster.service import start_worker

TOKEN_ENV = "TRAINWISE_AGENT_TOKEN"
TOKEN_PARAMETER_ENV = "TRAINWISE_AGENT_TOKEN_PARAMETER"
DEFAULT_PORT = 5040
DEFAULT_WORKER_PORTS = (5060, 5099)
MAX_BODY = 4096
TIMEOUT_S = 10.0
STALL_S = 30.0  # a connection that has not completed a request this long after opening or its last answer is closed
REAP_EVERY_S = 1.0
_ENDED_KEPT = 256  # ended workers whose exit status stays readable
_HOST = re.compile(r"^[A-Za-z0-9]([A-Za-z0-9.-]{0,251}[A-Za-z0-9])?$")
Network = ipaddress.IPv4Network | ipaddress.IPv6Network


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


# --------------------------------------------------------------------------- who may be a dispatcher

def resolve(host: str) -> set[ipaddress.IPv4Address | ipaddress.IPv6Address]:
    """Every address ``host`` resolves to (an IP literal: itself); empty when it does not resolve."""
    try:
        return {ipaddress.ip_address(host)}
    except ValueError:
        pass
    try:
        infos = socket.getaddrinfo(host, None, type=socket.SOCK_STREAM)
    except (OSError, UnicodeError):
        return set()
    return {ipaddress.ip_address(str(info[4][0]).split("%")[0]) for info in infos}


def is_loopback(host: str) -> bool:
    """Whether ``host`` resolves to loopback addresses only."""
    found = resolve(host)
    return bool(found) and all(a.is_loopback for a in found)


def own_addresses() -> set[ipaddress.IPv4Address | ipaddress.IPv6Address]:
    """This machine's addresses: its interfaces' (psutil) and its host name's."""
    found = resolve(socket.gethostname())
    try:
        import psutil

        for addrs in psutil.net_if_addrs().values():
            for a in addrs:
                if a.family in (socket.AF_INET, socket.AF_INET6):
                    found |= resolve(a.address.split("%")[0])
    except ImportError:  # psutil is a core dependency; without it, the host name's addresses
        pass
    return found


def default_dispatchers() -> tuple[Network, ...]:
    """Loopback and the node's own addresses."""
    own = sorted(own_addresses(), key=lambda a: (a.version, int(a)))
    return (ipaddress.ip_network("127.0.0.0/8"), ipaddress.ip_network("::1/128"),
            *(ipaddress.ip_network(a) for a in own))


def parse_dispatchers(text: str | None) -> tuple[Network, ...]:
    """``--dispatchers``: comma-separated CIDRs or addresses (None: :func:`default_dispatchers`)."""
    if text is None:
        return default_dispatchers()
    nets = []
    for part in (p.strip() for p in text.split(",")):
        try:
            nets.append(ipaddress.ip_network(part, strict=False))
        except ValueError:
            raise UserError(f"--dispatchers must be comma-separated CIDRs or IP addresses (e.g. 10.0.0.0/16), "
                            f"got {part!r}") from None
    if not nets:
        raise UserError("--dispatchers needs at least one CIDR or IP address")
    return tuple(nets)


# --------------------------------------------------------------------------- the token

def agent_token() -> str | None:
    """The shared token: ``TRAINWISE_AGENT_TOKEN``, else the SSM SecureString parameter named by
    ``TRAINWISE_AGENT_TOKEN_PARAMETER`` (read with boto3, decrypted), else None."""
    token = os.environ.get(TOKEN_ENV, "").strip()
    if token:
        return token
    name = os.environ.get(TOKEN_PARAMETER_ENV, "").strip()
    if not name:
        return None
    try:
        import boto3
        from botocore.exceptions import BotoCoreError, ClientError

        region = os.environ.get("AWS_REGION") or os.environ.get("AWS_DEFAULT_REGION")
        reply = boto3.session.Session().client("ssm", region_name=region).get_parameter(Name=name, WithDecryption=True)
    except (BotoCoreError, ClientError) as exc:
        raise UserError(f"{TOKEN_PARAMETER_ENV}={name}: cannot read the agent token from SSM ({exc})") from None
    return str(reply["Parameter"]["Value"]).strip() or None


def authorized(header: str, token: str | None) -> bool:
    """Whether an ``Authorization`` header carries ``token`` (constant time); any header without a token."""
    return token is None or hmac.compare_digest(header.encode(), f"Bearer {token}".encode())


# --------------------------------------------------------------------------- requests and the agent's state

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


class Refused(Exception):
    """A request the agent will not serve: its HTTP status and a one-line reason."""

    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status


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


@dataclass(frozen=True)
class Worker:
    """A worker the agent started."""

    request: WorkerRequest
    port: int
    process: subprocess.Popen

    def alive(self) -> bool:
        return self.process.poll() is None


class WorkerInfo(TypedDict):
    dispatcher: str
    cpus: list[int]
    port: int
    alive: bool


class NodeReply(TypedDict):
    """``GET /v1/node``: the CPUs the agent offers and its workers by id."""

    cpus: list[int]
    workers: dict[str, WorkerInfo]


class StartedWorker(TypedDict):
    """``POST /v1/workers``: the new worker's id and the address its dispatcher reaches it at."""

    id: str
    address: str


class WorkerStatus(TypedDict):
    """``GET /v1/workers/ID``: whether the worker is alive, and its exit status once it ended."""

    alive: bool
    returncode: int | None


class AgentsInfo(TypedDict):
    """The node agents a live run starts its workers through, as its result names them."""

    kind: str
    count: int
    addresses: list[str]
    cpus: list[list[int]]


@dataclass
class Agent:
    """The agent's state: the CPUs it offers, the worker ports it may use, the dispatchers it
    serves, its live workers and the exit status of those that ended."""

    cpus: tuple[int, ...]
    worker_ports: tuple[int, int]
    advertise: str | None = None
    dispatchers: tuple[Network, ...] = (ipaddress.ip_network("127.0.0.0/8"), ipaddress.ip_network("::1/128"))
    workers: dict[str, Worker] = field(default_factory=dict)
    ended: dict[str, int | None] = field(default_factory=dict)
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def node(self) -> NodeReply:
        self.reap()
        with self._lock:
            return {"cpus": list(self.cpus), "workers": {i: {"dispatcher": w.request.dispatcher, "cpus": list(w.request.cpus),
                                                            "port": w.port, "alive": w.alive()}
                                                        for i, w in self.workers.items()}}

    def allowed(self, dispatcher: str) -> str | None:
        """The dispatcher as ``IP:PORT`` when every address its host resolves to is inside the
        allow-list, else None. The worker gets that address, not the name, so a name that
        resolves elsewhere later (DNS rebinding) cannot move it."""
        host, port = parse_address(dispatcher, "dispatcher")
        found = resolve(host)
        if not found or not all(any(a in net for net in self.dispatchers if net.version == a.version) for a in found):
            return None
        first = sorted(found, key=lambda a: (a.version, int(a)))[0]
        return f"[{first}]:{port}" if first.version == 6 else f"{first}:{port}"

    def start(self, request: WorkerRequest, reached_at: str) -> StartedWorker:
        """Start a worker, or :class:`Refused` (403 dispatcher not allowed, 429 the job's cap, 503 no port)."""
        target = self.allowed(request.dispatcher)
        if target is None:
            raise Refused(403, f"dispatcher {request.dispatcher} is not on this agent's allow-list "
                               f"({', '.join(map(str, self.dispatchers))}; --dispatchers)")
        self.reap()
        with self._lock:
            mine = [w for w in self.workers.values() if w.request.dispatcher == request.dispatcher]
            if len(mine) >= len(self.cpus):
                raise Refused(429, f"the job of dispatcher {request.dispatcher} already has {len(mine)} workers here, "
                                   f"one per offered CPU ({len(self.cpus)})")
            try:
                port = free_port_in(self.worker_ports, [w.port for w in self.workers.values()])
            except RuntimeError as exc:
                raise Refused(503, str(exc)) from None
            address = f"{self.advertise or reached_at}:{port}"
            worker_id = f"w-{secrets.token_hex(6)}"
            self.workers[worker_id] = Worker(request, port, start_worker(target, request.cpus, port, address))
        return {"id": worker_id, "address": address}

    def status(self, worker_id: str) -> WorkerStatus | None:
        self.reap()
        with self._lock:
            worker = self.workers.get(worker_id)
            if worker is not None:
                return {"alive": worker.alive(), "returncode": worker.process.poll()}
            if worker_id in self.ended:
                return {"alive": False, "returncode": self.ended[worker_id]}
        return None

    def reap(self) -> list[str]:
        """Collect the workers that exited (no zombies; their CPU and port free again); their ids."""
        with self._lock:
            dead = [i for i, w in self.workers.items() if not w.alive()]
            for i in dead:
                self._ended(i, self.workers.pop(i).process.returncode)
        return dead

    def _ended(self, worker_id: str, returncode: int | None) -> None:
        self.ended[worker_id] = returncode
        while len(self.ended) > _ENDED_KEPT:
            self.ended.pop(next(iter(self.ended)))

    def stop(self, worker_ids: Iterable[str] | None = None, *, dispatcher: str | None = None) -> list[str]:
        """Stop these workers, or those of one job (``dispatcher``), or with neither all of them
        (the agent's own shutdown); the ids stopped."""
        with self._lock:
            if worker_ids is not None:
                ids = [i for i in worker_ids if i in self.workers]
            else:
                ids = [i for i, w in self.workers.items() if dispatcher is None or w.request.dispatcher == dispatcher]
            stopped = [(i, self.workers.pop(i).process) for i in ids]
        for i, p in stopped:
            if p.poll() is None:
                p.kill()
            p.wait()
            with self._lock:
                self._ended(i, p.returncode)
        return ids


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
        token = agent_token()
        clients = tuple(AgentClient(a, token) for a in addresses)
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

    def describe(self) -> AgentsInfo:
        return {"kind": "node agents", "count": self.count, "addresses": [c.address for c in self.clients],
                "cpus": [list(c) for c in self.cpus]}
