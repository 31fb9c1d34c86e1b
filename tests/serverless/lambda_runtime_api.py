"""A local stand-in for AWS Lambda's Runtime API, and the function's zip run under awslambdaric
against it, in a fresh interpreter whose path holds only the zip's files, a layer and the runtime.

The Runtime API (docs.aws.amazon.com/lambda/latest/dg/runtimes-api.html), the part a runtime
client calls:

* ``GET /2018-06-01/runtime/invocation/next``: the next event (blocks until there is one), with
  ``Lambda-Runtime-Aws-Request-Id``, ``Lambda-Runtime-Deadline-Ms``,
  ``Lambda-Runtime-Invoked-Function-Arn`` and ``Lambda-Runtime-Trace-Id``;
* ``POST /2018-06-01/runtime/invocation/{id}/response``: the handler's result;
* ``POST /2018-06-01/runtime/invocation/{id}/error``: the handler's error (its JSON body and the
  ``Lambda-Runtime-Function-Error-Type`` header);
* ``POST /2018-06-01/runtime/init/error``: the function could not start.
"""

from __future__ import annotations

import json
import os
import queue
import subprocess
import sys
import threading
import time
import uuid
import zipfile
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from importlib import metadata
from pathlib import Path
from typing import Any

PREFIX = "/2018-06-01/runtime"
FUNCTION_ARN = "arn:aws:lambda:us-east-1:123456789012:function:trainwise-dev-rollout"
#: what the layer holds: the handler's third-party needs and what they need (boto3 comes with
#: Lambda's runtime; the handler imports it only for weights in S3, which these events do not use)
LAYER_DISTRIBUTIONS = ("numpy", "gymnasium", "cloudpickle", "farama-notifications", "typing_extensions")
#: the runtime interface client and what it needs: in Lambda, part of the managed runtime
RUNTIME_DISTRIBUTIONS = ("awslambdaric", "simplejson", "snapshot-restore-py")


@dataclass(frozen=True)
class Outcome:
    """What the runtime posted for one invocation: ``kind`` "response" or "error"."""

    kind: str
    body: bytes
    error_type: str | None
    seconds: float


class RuntimeAPI:
    """The stand-in server; :meth:`invoke` queues an event and waits for the runtime's answer."""

    def __init__(self) -> None:
        self.events: queue.Queue[tuple[str, bytes]] = queue.Queue()
        self.outcomes: dict[str, queue.Queue[Outcome]] = {}
        self.init_errors: list[bytes] = []
        self.started: dict[str, float] = {}
        api = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *_: Any) -> None:
                pass

            def do_GET(self) -> None:  # noqa: N802
                if self.path != f"{PREFIX}/invocation/next":
                    return self._send(404, b"{}")
                request_id, body = api.events.get()
                api.started[request_id] = time.perf_counter()
                self._send(200, body, {"Lambda-Runtime-Aws-Request-Id": request_id,
                                       "Lambda-Runtime-Deadline-Ms": str(int(time.time() * 1000) + 300_000),
                                       "Lambda-Runtime-Invoked-Function-Arn": FUNCTION_ARN,
                                       "Lambda-Runtime-Trace-Id": "Root=1-00000000-000000000000000000000000"})

            def do_POST(self) -> None:  # noqa: N802
                body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
                parts = self.path.removeprefix(f"{PREFIX}/").split("/")
                if parts == ["init", "error"]:
                    api.init_errors.append(body)
                    return self._send(202, b'{"status": "OK"}')
                if len(parts) == 3 and parts[0] == "invocation" and parts[2] in ("response", "error") \
                        and parts[1] in api.outcomes:
                    seconds = time.perf_counter() - api.started.get(parts[1], time.perf_counter())
                    kind = parts[2]
                    error_type = self.headers.get("Lambda-Runtime-Function-Error-Type") if kind == "error" else None
                    api.outcomes[parts[1]].put(Outcome(kind, body, error_type, seconds))
                    return self._send(202, b'{"status": "OK"}')
                self._send(404, b"{}")

            def _send(self, status: int, body: bytes, headers: dict[str, str] | None = None) -> None:
                self.send_response(status)
                for key, value in {"Content-Type": "application/json", **(headers or {})}.items():
                    self.send_header(key, value)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    @property
    def address(self) -> str:
        host, port = self.server.server_address[:2]
        return f"{host}:{port}"

    def invoke(self, event: Any, timeout_s: float = 120.0) -> Outcome:
        request_id = str(uuid.uuid4())
        self.outcomes[request_id] = queue.Queue()
        self.events.put((request_id, json.dumps(event).encode()))
        try:
            return self.outcomes[request_id].get(timeout=timeout_s)
        except queue.Empty:
            raise AssertionError(f"the runtime answered nothing within {timeout_s} s; init errors: {self.init_errors}") from None

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


def link_distributions(names: tuple[str, ...], into: Path) -> Path:
    """A folder holding (as symlinks) the top-level modules of these installed distributions only."""
    into.mkdir(parents=True, exist_ok=True)
    for name in names:
        dist = metadata.distribution(name)
        tops = {f.parts[0] for f in dist.files or () if f.parts[0] not in ("..", "__pycache__")
                and not f.parts[0].endswith((".dist-info", ".data"))}
        for top in tops:
            source = Path(str(dist.locate_file(top)))
            if source.exists() and not (into / top).exists():
                (into / top).symlink_to(source)
    return into


#: run in a fresh interpreter with -S -E (no site-packages, no PYTHON* variables): the path is
#: the task folder, the layer and the runtime client, then the standard library
_BOOT = r"""
import runpy, sys
task, layer, ric = sys.argv[1:4]
sys.path[:] = [task, layer, ric] + [p for p in sys.path if p and "site-packages" not in p]
sys.argv = ["awslambdaric", "serverless.handler.handler"]
runpy.run_module("awslambdaric", run_name="__main__")
"""


class LambdaRuntime:
    """The function zip extracted into a task folder and run by awslambdaric against a
    :class:`RuntimeAPI`, as Lambda's managed Python runtime runs it."""

    def __init__(self, zip_path: Path, work: Path) -> None:
        self.task = work / "task"
        with zipfile.ZipFile(zip_path) as archive:
            archive.extractall(self.task)
        layer = link_distributions(LAYER_DISTRIBUTIONS, work / "layer" / "python")
        ric = link_distributions(RUNTIME_DISTRIBUTIONS, work / "runtime")
        self.api = RuntimeAPI()
        env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "AWS_LAMBDA_RUNTIME_API": self.api.address,
               "LAMBDA_TASK_ROOT": str(self.task), "AWS_LAMBDA_FUNCTION_NAME": "trainwise-dev-rollout",
               "AWS_LAMBDA_FUNCTION_MEMORY_SIZE": "1769", "AWS_LAMBDA_LOG_FORMAT": "Text", "HOME": str(work)}
        self.process = subprocess.Popen([sys.executable, "-S", "-E", "-c", _BOOT, str(self.task), str(layer), str(ric)],
                                        cwd=self.task, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT)

    def invoke(self, event: Any) -> Outcome:
        if self.process.poll() is not None:
            out = self.process.stdout.read().decode(errors="replace") if self.process.stdout else ""
            raise AssertionError(f"the runtime exited ({self.process.returncode}): {out[-3000:]}")
        return self.api.invoke(event)

    def close(self) -> str:
        """Stop the runtime; its output (the function's log)."""
        self.process.kill()
        out, _ = self.process.communicate(timeout=30)
        self.api.close()
        return out.decode(errors="replace") if out else ""
