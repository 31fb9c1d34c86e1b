"""Writing results as JSON: atomically, with the environment that produced them.

Every CLI command and benchmark writes its result through :func:`write_json`, so a
result file is either complete or absent (never half-written) and always says which
machine and versions produced it.
"""

from __future__ import annotations

import json
import os
import platform
from importlib import metadata
from pathlib import Path
from typing import Any, TypedDict

from core.atomic import check_replaceable, write_text
from core.json_edge import JsonObject

_VERSIONED = ("trainwise", "torch", "numpy", "gymnasium", "tensorflow-cpu", "prefect", "ray", "boto3")


class Environment(TypedDict):
    """Where a result was obtained: CPU count, Python, platform and the versions that matter."""

    cpu_count: int | None
    python: str
    platform: str
    machine: str
    versions: dict[str, str]


def environment() -> Environment:
    """CPU count, Python, platform and the versions of the packages that matter."""
    versions: dict[str, str] = {}
    for name in _VERSIONED:
        try:
            versions[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            continue
    return {
        "cpu_count": os.cpu_count(),
        "python": platform.python_version(),
        "platform": platform.platform(),
        "machine": platform.machine(),
        "versions": versions,
    }


def _default(obj: Any) -> Any:
    # numpy scalars/arrays, dataclasses and pydantic models show up in results.
    if hasattr(obj, "model_dump"):
        return obj.model_dump(mode="json")
    if hasattr(obj, "__dataclass_fields__"):
        from dataclasses import asdict

        return asdict(obj)
    if hasattr(obj, "tolist"):
        return obj.tolist()
    if isinstance(obj, Path):
        return str(obj)
    if isinstance(obj, (set, frozenset)):
        return sorted(obj)
    raise TypeError(f"cannot encode {type(obj).__name__} as JSON")


def to_json(payload: Any) -> str:
    return json.dumps(payload, indent=2, default=_default, allow_nan=False)


def write_json(path: str | os.PathLike[str], payload: JsonObject, *, with_environment: bool = True) -> Path:
    """Write ``payload`` (plus ``environment``) to ``path`` atomically (:mod:`core.atomic`); return the path."""
    path = check_replaceable(path)
    if with_environment and "environment" not in payload:
        payload = {**payload, "environment": environment()}
    text = to_json(payload)  # encode first: a payload that cannot be encoded writes nothing
    return write_text(path, text + "\n")
