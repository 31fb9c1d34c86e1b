"""A local "function instance": a long-lived process that runs the rollout handler.

Started by :class:`serverless.backends.local.LocalBackend` as
``python -m serverless.backends.local_worker``. It speaks length-prefixed JSON
frames on stdin/stdout (the same JSON a Lambda invoke carries; never pickle):

- on start it sends ``{"ready": true, "pid": .., "import_ms": ..}``;
- ``{"op": "invoke", "event": {...}}`` -> ``{"ok": true, "result": {...}, "wall_ms", "cpu_ms",
  "speed_factor"}`` (``cpu_ms`` raw; ``speed_factor`` from ``serverless.host_speed``)
  or ``{"ok": false, "error": "..."}``;
- ``{"op": "reset"}`` -> ``{"ok": true}`` (drop warm state: a new function version);
- ``{"op": "exit"}`` ends the process.

Anything the handler prints goes to stderr so it cannot corrupt the frames.
"""

from __future__ import annotations

import json
import os
import struct
import sys
import time
from typing import BinaryIO, Literal, TypedDict

from serverless.rollout_event import RolloutEvent, RolloutReply

_HEADER = struct.Struct(">I")


class _WorkerMessageRequired(TypedDict):
    """The key every frame to the worker has."""

    op: Literal["invoke", "reset", "exit"]


class WorkerMessage(_WorkerMessageRequired, total=False):
    """A frame to the worker (the module's docstring)."""

    event: RolloutEvent


class WorkerReply(TypedDict, total=False):
    """A frame from the worker: ready, an invocation's outcome, or a reset's acknowledgement
    (``timed_out`` is set by the backend when it killed the worker)."""

    ready: bool
    pid: int
    import_ms: float
    ok: bool
    result: RolloutReply
    error: str
    timed_out: bool
    wall_ms: float
    cpu_ms: float
    speed_factor: float


def write_frame(stream: BinaryIO, payload: WorkerMessage | WorkerReply) -> None:
    blob = json.dumps(payload, separators=(",", ":")).encode()
    stream.write(_HEADER.pack(len(blob)) + blob)
    stream.flush()


def read_frame(stream: BinaryIO) -> WorkerMessage | WorkerReply | None:
    head = stream.read(_HEADER.size)
    if len(head) < _HEADER.size:
        return None
    (size,) = _HEADER.unpack(head)
    blob = stream.read(size)
    if len(blob) < size:
        return None
    return json.loads(blob)


def main() -> None:
    out = os.fdopen(os.dup(sys.stdout.fileno()), "wb")
    os.dup2(sys.stderr.fileno(), sys.stdout.fileno())  # stray prints go to stderr
    inp = sys.stdin.buffer
    t0 = time.perf_counter()
    from serverless import handler as handler_module
    from serverless import host_speed

    import_ms = (time.perf_counter() - t0) * 1000.0 + 0.0
    write_frame(out, {"ready": True, "pid": os.getpid(), "import_ms": import_ms})
    while True:
        msg = read_frame(inp)
        if msg is None or msg.get("op") == "exit":
            return
        if msg.get("op") == "reset":
            handler_module.reset_warm_state()
            write_frame(out, {"ok": True})
            continue
        speed = host_speed.Bracket("rollout")  # the metronome runs outside the timed work
        speed.start()
        w0, c0 = time.perf_counter(), time.process_time()
        try:
            result = handler_module.handler(msg["event"], None)
        except Exception as exc:  # reported per invocation, like a Lambda function error
            write_frame(out, {"ok": False, "error": f"{type(exc).__name__}: {exc}"})
            continue
        wall_ms, cpu_ms = (time.perf_counter() - w0) * 1000.0, (time.process_time() - c0) * 1000.0
        write_frame(
            out,
            {"ok": True, "result": result, "wall_ms": wall_ms, "cpu_ms": cpu_ms, "speed_factor": speed.stop()},
        )


if __name__ == "__main__":
    main()
