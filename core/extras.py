"""Which optional extra of ``trainwise`` brings which engine, and the one line that names it.

The core install carries what every floor needs (Prefect, the specs, the search libraries); each
engine is an extra (``pyproject.toml``): an ingestion node installs ``trainwise[ingest]`` and has
no torch, a learner installs ``trainwise[rl]`` and has no TensorFlow. A command that reaches an
engine whose extra is missing stops with :func:`missing_extra_message` (the CLI catches the
``ModuleNotFoundError`` wherever the import happens, so every path says the same line).
"""

from __future__ import annotations

# top-level module -> the extra that installs it
EXTRA_OF_MODULE: dict[str, str] = {
    "torch": "rl",
    "gymnasium": "rl",
    "threadpoolctl": "rl",
    "Box2D": "box2d",
    "pygame": "box2d",
    "tensorflow": "ingest",
    "uvicorn": "ingest",
    "starlette": "ingest",
    "ray": "ray",
    "prefect_aws": "aws",
    "stable_baselines3": "bench",
}


def extra_for(module: str | None) -> str | None:
    """The extra that installs ``module`` (a dotted name is judged by its top-level package)."""
    if not module:
        return None
    return EXTRA_OF_MODULE.get(module.split(".")[0])


def missing_extra_message(extra: str) -> str:
    """The one line a command prints when ``extra`` is not installed."""
    return f"the '{extra}' extra is not installed: pip install 'trainwise[{extra}]'"


def missing_extra(exc: BaseException) -> str | None:
    """The message for an import error caused by a missing extra, None for any other error."""
    if isinstance(exc, ModuleNotFoundError):
        extra = extra_for(exc.name)
        return missing_extra_message(extra) if extra else None
    return None


def unavailable(what: str, exc: ImportError) -> str:
    """One line for ``what`` (an optimizer, a backend) that cannot be imported: the missing
    extra when that is the cause, else the import error itself."""
    message = missing_extra(exc)
    return f"{what}: {message}" if message else f"{what} is not available in this build ({exc})"
