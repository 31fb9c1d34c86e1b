"""Where trainwise keeps things.

- ``runs/`` (``TRAINWISE_RUNS``): one new folder per run (reports, plots, JSON);
  never overwritten.
- ``.trainwise/`` (``TRAINWISE_HOME``): caches that may be reused across runs:
  ``profiles/`` (Seraph and InTune profiles), ``agents/`` (trained InTune agents),
  ``checkpoints/``.

Both default to folders under the current directory so a newcomer can find them.
``TRAINWISE_STATE`` (:mod:`core.state`) may share ``profiles/`` and ``agents/`` through S3.
"""

from __future__ import annotations

import hashlib
import json
import os
import platform
import secrets
import time
from pathlib import Path
from typing import TypedDict


def home() -> Path:
    return Path(os.environ.get("TRAINWISE_HOME", ".trainwise")).resolve()


def cache_dir(kind: str) -> Path:
    """``home()/kind``, created on demand (kind: profiles, agents, checkpoints...)."""
    path = home() / kind
    path.mkdir(parents=True, exist_ok=True)
    return path


def runs_root() -> Path:
    return Path(os.environ.get("TRAINWISE_RUNS", "runs")).resolve()


def new_run_dir(kind: str) -> Path:
    """A fresh folder ``runs/<UTC time>-<kind>-<random>``; never an existing one."""
    return unique_dir(runs_root(), f"-{kind}")


def unique_dir(parent: Path, infix: str = "") -> Path:
    """A fresh folder ``parent/<UTC time><infix>-<random>``, made here (so no other process
    has it); ``parent`` is created if need be."""
    parent.mkdir(parents=True, exist_ok=True)
    stamp = time.strftime("%Y%m%d-%H%M%S", time.gmtime())
    while True:
        path = parent / f"{stamp}{infix}-{secrets.token_hex(3)}"
        try:
            path.mkdir()
            return path
        except FileExistsError:
            continue


def _cpu_model() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


class Hardware(TypedDict):
    """The facts about a machine that change a profile's numbers."""

    cpu_model: str
    cpu_count: int | None
    memory_gib: int
    machine: str


def hardware() -> Hardware:
    """The facts about this machine that change a profile's numbers."""
    try:
        import psutil

        mem = int(psutil.virtual_memory().total)
    except Exception:  # psutil missing or unsupported platform
        mem = 0
    return {
        "cpu_model": _cpu_model(),
        "cpu_count": os.cpu_count(),
        "memory_gib": round(mem / 2**30),
        "machine": platform.machine(),
    }


def fingerprint(obj: object) -> str:
    """A short stable hash of a JSON-able object (workload specs, hardware)."""
    blob = json.dumps(obj, sort_keys=True, default=str).encode()
    return hashlib.sha256(blob).hexdigest()[:16]


def hardware_fingerprint() -> str:
    return fingerprint(hardware())
