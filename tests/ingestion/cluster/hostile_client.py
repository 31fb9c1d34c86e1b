"""A hostile client for the node agent, kept to check its defences on loopback:

    python -m tests.ingestion.cluster.hostile_client --agent 127.0.0.1:5040 --token T --agent-pid PID

Each check prints ``PASS name`` or ``FAIL name: why``; the exit code is the number of failures.
Every loop is bounded and every socket has a timeout, so the script stops by itself. It refuses
to attack anything but a loopback address.

The checks (the agent started with one offered CPU and at least two worker ports):

1. no token, a wrong token: 401, nothing starts;
2. a dispatcher outside the allow-list (a TEST-NET address, a name that does not resolve): 403,
   nothing starts;
3. a body over the limit, a body that is not JSON, unknown fields: 4xx, nothing starts;
4. a client that stalls mid-body and one that stalls mid-headers: dropped within the stall bound,
   nothing starts; the agent still answers others meanwhile;
5. a second worker of one job on a one-CPU agent: 429 (one worker per offered CPU per job);
6. ``DELETE /v1/workers`` without a job: 400; with job A: only A's workers stop, B's live on;
7. a worker that dies is reaped: the agent has no zombie child left and its status says it ended.
"""

from __future__ import annotations

import argparse
import http.client
import json
import socket
import sys
import time
from dataclasses import dataclass, field
from typing import Any


@dataclass
class Hostile:
    host: str
    port: int
    token: str
    agent_pid: int | None
    stall_s: float
    failures: list[str] = field(default_factory=list)

    # ------------------------------------------------------------------ plumbing
    def call(self, method: str, path: str, body: Any = None, token: str | None = "", raw: bytes | None = None,
             headers: dict[str, str] | None = None) -> tuple[int, Any]:
        conn = http.client.HTTPConnection(self.host, self.port, timeout=10)
        sent = dict(headers or {})
        use = self.token if token == "" else token
        if use is not None:
            sent["Authorization"] = f"Bearer {use}"
        data = raw if raw is not None else (None if body is None else json.dumps(body).encode())
        try:
            conn.request(method, path, data, sent)
            response = conn.getresponse()
            text = response.read()
        finally:
            conn.close()
        try:
            return response.status, json.loads(text or b"null")
        except json.JSONDecodeError:
            return response.status, text.decode(errors="replace")

    def workers(self) -> dict[str, Any]:
        status, node = self.call("GET", "/v1/node")
        return node["workers"] if status == 200 else {}

    def children(self) -> list[Any]:
        if self.agent_pid is None:
            return []
        import psutil

        return psutil.Process(self.agent_pid).children()

    def check(self, name: str, ok: bool, why: str = "") -> None:
        print(f"PASS {name}" if ok else f"FAIL {name}: {why}", flush=True)
        if not ok:
            self.failures.append(name)

    def refused(self, name: str, expect: int, method: str, path: str, **kw: Any) -> None:
        before = set(self.workers())
        status, answer = self.call(method, path, **kw)
        after = set(self.workers())
        self.check(name, status == expect and after == before, f"status {status} ({answer}), workers {before} -> {after}")

    def stalled(self, name: str, payload: bytes) -> None:
        """Send ``payload`` and nothing more: the agent must close the connection in time."""
        before = set(self.workers())
        with socket.create_connection((self.host, self.port), timeout=self.stall_s + 15) as s:
            s.sendall(payload)
            t0 = time.monotonic()
            other_ok = self.call("GET", "/v1/node")[0] == 200  # others are still served meanwhile
            try:
                got = s.recv(65536)
                while got and not got.startswith(b"HTTP/1.1 4"):
                    got = s.recv(65536)
                closed = True
            except socket.timeout:
                closed = False
            waited = time.monotonic() - t0
        after = set(self.workers())
        self.check(name, closed and other_ok and after == before,
                   f"closed={closed} after {waited:.1f} s, others served={other_ok}, workers {before} -> {after}")

    # ------------------------------------------------------------------ the checks
    def run(self) -> int:
        good = {"dispatcher": "127.0.0.1:9", "cpus": self.cpus()}
        self.refused("no token", 401, "POST", "/v1/workers", body=good, token=None)
        self.refused("wrong token", 401, "POST", "/v1/workers", body=good, token="guess")
        self.refused("dispatcher outside the allow-list", 403, "POST", "/v1/workers",
                     body={**good, "dispatcher": "203.0.113.7:5050"})
        self.refused("dispatcher that does not resolve", 403, "POST", "/v1/workers",
                     body={**good, "dispatcher": "no-such-host.invalid:5050"})
        self.refused("oversized body", 413, "POST", "/v1/workers", raw=b"{" + b" " * 100_000 + b"}")
        self.refused("body not JSON", 400, "POST", "/v1/workers", raw=b"\xff\xfe not json")
        self.refused("unknown fields", 400, "POST", "/v1/workers", body={**good, "pipeline": "rm -rf /"})
        body = json.dumps(good).encode()
        head = (f"POST /v1/workers HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer {self.token}\r\n"
                f"Content-Type: application/json\r\nContent-Length: {len(body) + 50}\r\n\r\n").encode()
        self.stalled("stall mid-body", head + body)
        self.stalled("stall mid-headers", b"GET /v1/node HTTP/1.1\r\nHost: x\r\nX-Slow: ")
        self.cap_and_scoped_delete(good)
        self.reaped()
        return len(self.failures)

    def cpus(self) -> list[int]:
        status, node = self.call("GET", "/v1/node")
        if status != 200:
            raise SystemExit(f"the agent at {self.host}:{self.port} does not answer with the token ({status})")
        return node["cpus"]

    def cap_and_scoped_delete(self, good: dict[str, Any]) -> None:
        job_a, job_b = {**good, "dispatcher": "127.0.0.1:9"}, {**good, "dispatcher": "127.0.0.1:10"}
        a_status, a = self.call("POST", "/v1/workers", body=job_a)
        self.check("a job's first worker starts", a_status == 201, f"{a_status} {a}")
        cap_status, cap = self.call("POST", "/v1/workers", body=job_a)
        self.check("one worker per offered CPU per job", cap_status == 429, f"{cap_status} {cap}")
        b_status, b = self.call("POST", "/v1/workers", body=job_b)
        self.check("another job's worker starts", b_status == 201, f"{b_status} {b}")
        self.refused("stop all without naming a job", 400, "DELETE", "/v1/workers")
        status, stopped = self.call("DELETE", "/v1/workers?dispatcher=127.0.0.1:9")
        left = self.workers()
        self.check("a job stops only its own workers",
                   status == 200 and stopped == {"stopped": [a.get("id")]} and set(left) == {b.get("id")},
                   f"{status} {stopped}, left {left}")
        self.call("DELETE", f"/v1/workers/{b.get('id')}")

    def reaped(self) -> None:
        """Start a worker for a dispatcher nothing listens on, kill it behind the agent's back,
        and wait (bounded) for the agent to reap it."""
        status, started = self.call("POST", "/v1/workers", body={"dispatcher": "127.0.0.1:9", "cpus": self.cpus()})
        if status != 201:
            return self.check("a dead worker is reaped", False, f"could not start one: {status} {started}")
        for child in self.children():
            child.kill()
        deadline = time.monotonic() + 15
        while time.monotonic() < deadline and started["id"] in self.workers():
            time.sleep(0.2)
        zombies = [c.pid for c in self.children() if c.status() == "zombie"]
        status, state = self.call("GET", f"/v1/workers/{started['id']}")
        self.check("a dead worker is reaped", started["id"] not in self.workers() and not zombies
                   and state == {"alive": False, "returncode": -9}, f"status {state}, zombies {zombies}")


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--agent", required=True, help="HOST:PORT of the agent (loopback only)")
    p.add_argument("--token", required=True)
    p.add_argument("--agent-pid", type=int, default=None, help="the agent's process id (to look for zombies)")
    p.add_argument("--stall-s", type=float, default=30.0, help="the agent's stall bound (--stall-s)")
    args = p.parse_args(argv)
    host, _, port = args.agent.rpartition(":")
    addresses = {info[4][0] for info in socket.getaddrinfo(host, None)}
    if not all(a.startswith("127.") or a == "::1" for a in addresses):
        print(f"refusing to attack {args.agent}: not a loopback address", file=sys.stderr)
        return 2
    return Hostile(host, int(port), args.token, args.agent_pid, args.stall_s).run()


if __name__ == "__main__":
    sys.exit(main())
