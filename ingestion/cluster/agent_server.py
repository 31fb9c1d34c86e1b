"""The node agent's HTTP side: the protocol of :mod:`ingestion.cluster.agent` as a starlette app
served by uvicorn, with a deadline on every connection.

uvicorn closes idle keep-alive connections but waits as long as a client likes for the rest of
a request's headers or body; :class:`_Deadline` closes a connection that has not completed a
request within ``stall_s`` of opening or of its last answer, so a client that stalls mid-request
(fewer bytes than its Content-Length, half a header) holds nothing for longer. The app reads a
body of at most ``MAX_BODY`` bytes and starts nothing for a request whose client went away.
"""

from __future__ import annotations

import json
import socket
import threading
import time
from dataclasses import dataclass, field
from typing import Any

from core.errors import UserError
from ingestion.cluster.agent import (MAX_BODY, REAP_EVERY_S, STALL_S, TOKEN_ENV, TOKEN_PARAMETER_ENV, Agent,
                                     Refused, WorkerRequest, authorized, is_loopback)


def _protocol(stall_s: float) -> type:
    """uvicorn's h11 protocol with a per-request deadline of ``stall_s`` seconds."""
    from uvicorn.protocols.http.h11_impl import H11Protocol

    class _Deadline(H11Protocol):  # type: ignore[misc]
        def connection_made(self, transport: Any) -> None:  # type: ignore[override]
            super().connection_made(transport)
            self._deadline = self.loop.call_later(stall_s, self._stalled)

        def on_response_complete(self) -> None:
            super().on_response_complete()
            self._deadline.cancel()
            self._deadline = self.loop.call_later(stall_s, self._stalled)

        def connection_lost(self, exc: Exception | None) -> None:
            self._deadline.cancel()
            super().connection_lost(exc)

        def _stalled(self) -> None:
            if not self.transport.is_closing():
                self.transport.close()  # the app, if still reading the body, sees a disconnect

    return _Deadline


async def _body(request: Any) -> Any:
    """The JSON body, at most MAX_BODY bytes; Refused 400/413 otherwise."""
    declared = request.headers.get("content-length", "")
    if declared and (not declared.isdigit() or int(declared) > MAX_BODY):
        raise Refused(413, f"a request body is at most {MAX_BODY} bytes, with a Content-Length")
    data = b""
    async for chunk in request.stream():
        data += chunk
        if len(data) > MAX_BODY:
            raise Refused(413, f"a request body is at most {MAX_BODY} bytes")
    try:
        return json.loads(data)
    except (UnicodeDecodeError, json.JSONDecodeError):
        raise Refused(400, "the request body is not JSON") from None


def make_app(agent: Agent, token: str | None) -> Any:
    """The starlette app of the protocol (paths in :mod:`ingestion.cluster.agent`)."""
    from starlette.applications import Starlette
    from starlette.requests import ClientDisconnect, Request
    from starlette.responses import JSONResponse
    from starlette.routing import Route

    def reply(status: int, body: Any) -> JSONResponse:
        return JSONResponse(body, status_code=status)

    async def guarded(request: Request, answer: Any) -> JSONResponse:
        if not authorized(request.headers.get("authorization", ""), token):
            return reply(401, {"error": f"missing or wrong bearer token ({TOKEN_ENV})"})
        try:
            return await answer(request)
        except Refused as exc:
            return reply(exc.status, {"error": str(exc)})
        except ClientDisconnect:
            return reply(400, {"error": "the client went away mid-request"})

    async def node(request: Request) -> JSONResponse:
        return reply(200, agent.node())

    async def post_worker(request: Request) -> JSONResponse:
        try:
            worker = WorkerRequest.from_json(await _body(request), agent.cpus)
        except ValueError as exc:
            raise Refused(400, str(exc)) from None
        return reply(201, agent.start(worker, request.scope["server"][0]))

    async def delete_workers(request: Request) -> JSONResponse:
        dispatcher = request.query_params.get("dispatcher")
        if not dispatcher:
            raise Refused(400, "name the job whose workers to stop: DELETE /v1/workers?dispatcher=HOST:PORT")
        return reply(200, {"stopped": agent.stop(dispatcher=dispatcher)})

    async def one_worker(request: Request) -> JSONResponse:
        worker_id = request.path_params["worker_id"]
        if request.method == "DELETE":
            stopped = agent.stop([worker_id])
            answer: Any = {"stopped": stopped} if stopped else None
        else:
            answer = agent.status(worker_id)
        if answer is None:
            raise Refused(404, f"no such resource {request.url.path}")
        return reply(200, answer)

    def route(path: str, answer: Any, methods: list[str]) -> Route:
        async def endpoint(request: Request) -> JSONResponse:
            return await guarded(request, answer)

        return Route(path, endpoint, methods=methods)

    async def not_found(request: Request, exc: Exception) -> JSONResponse:
        status = getattr(exc, "status_code", 404)
        return reply(status, {"error": f"no such resource {request.method} {request.url.path}"})

    return Starlette(routes=[
        route("/v1/node", node, ["GET"]),
        route("/v1/workers", post_worker, ["POST"]),
        route("/v1/workers", delete_workers, ["DELETE"]),
        route("/v1/workers/{worker_id}", one_worker, ["GET", "DELETE"]),
    ], exception_handlers={404: not_found, 405: not_found})


def check_listen(host: str, token: str | None) -> None:
    """Listening beyond loopback needs a token: a UserError otherwise."""
    if token is None and not is_loopback(host):
        raise UserError(f"--listen {host} is beyond loopback: set {TOKEN_ENV} (or {TOKEN_PARAMETER_ENV}, an SSM "
                        "parameter) so requests must carry the shared token, or listen on 127.0.0.1")


@dataclass
class AgentServer:
    """The agent served on a socket bound at construction (``address`` is known at once)."""

    agent: Agent
    listen: tuple[str, int]
    token: str | None = None
    stall_s: float = STALL_S
    _socket: socket.socket = field(init=False)
    _server: Any = field(init=False)
    _stop: threading.Event = field(default_factory=threading.Event)

    def __post_init__(self) -> None:
        import uvicorn

        check_listen(self.listen[0], self.token)
        family = socket.AF_INET6 if ":" in self.listen[0] else socket.AF_INET
        self._socket = socket.socket(family, socket.SOCK_STREAM)
        self._socket.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            self._socket.bind(self.listen)
            self._socket.listen(64)  # connections wait in the backlog until uvicorn serves
        except OSError:
            self._socket.close()
            raise
        config = uvicorn.Config(make_app(self.agent, self.token), http=_protocol(self.stall_s), lifespan="off",
                                log_level="warning", access_log=False, timeout_keep_alive=5)
        self._server = uvicorn.Server(config)

    @property
    def address(self) -> str:
        host, port = self._socket.getsockname()[:2]
        return f"{host}:{port}"

    def _reaper(self) -> None:
        while not self._stop.wait(REAP_EVERY_S):
            self.agent.reap()

    def run(self) -> None:
        """Serve until :meth:`stop` (or SIGINT/SIGTERM in the main thread); then stop every worker."""
        reaper = threading.Thread(target=self._reaper, daemon=True, name="agent-reaper")
        reaper.start()
        try:
            self._server.run(sockets=[self._socket])
        finally:
            self._stop.set()
            self.agent.stop()
            self._socket.close()

    def start(self) -> threading.Thread:
        """Serve in a background thread (tests, embedding); returns once it accepts connections."""
        thread = threading.Thread(target=self.run, daemon=True, name="node-agent")
        thread.start()
        deadline = time.monotonic() + 30
        while not self._server.started and thread.is_alive() and time.monotonic() < deadline:
            time.sleep(0.01)
        if not self._server.started:
            raise RuntimeError("the node agent did not start")
        return thread

    def stop(self) -> None:
        self._server.should_exit = True


def serve(listen: tuple[str, int], agent: Agent, token: str | None = None, stall_s: float = STALL_S) -> AgentServer:
    """The agent bound to ``listen`` (not yet serving: call ``run`` or ``start``)."""
    return AgentServer(agent, listen, token, stall_s)

