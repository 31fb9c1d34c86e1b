"""Read ``prefect.yaml`` into deployments that ``trainwise serve`` can serve.

One source of truth: the same file works with ``prefect deploy`` (work pool +
worker) and with ``trainwise serve`` (one process serves every deployment). Loading
checks what a typo would otherwise hide until the schedule fires: the entrypoint
names an existing flow, the parameters fit that flow's signature, the config files
they name exist and validate, and every schedule parses.
"""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from core.errors import UserError

_SCHEDULE_KINDS = ("cron", "interval", "rrule")
_SCHEDULE_FIELDS = {*_SCHEDULE_KINDS, "timezone", "active", "parameters", "slug", "day_or", "anchor_date"}


@dataclass
class DeploymentEntry:
    name: str
    entrypoint: str
    flow: Any  # prefect.Flow
    parameters: dict[str, Any] = field(default_factory=dict)
    schedules: list[Any] = field(default_factory=list)  # prefect.schedules.Schedule
    description: str | None = None
    tags: list[str] = field(default_factory=list)

    @property
    def schedule_texts(self) -> list[str]:
        out = []
        for s in self.schedules:
            when = s.cron or s.rrule or f"every {s.interval}"
            out.append(f"{when} ({s.timezone or 'UTC'}){'' if s.active else ' inactive'}")
        return out

    def to_runner_deployment(self) -> Any:
        return self.flow.to_deployment(
            name=self.name,
            parameters=self.parameters,
            schedules=self.schedules,
            description=self.description,
            tags=self.tags,
        )


def _schedule(raw: Any, where: str) -> Any:
    from prefect.schedules import Schedule

    if not isinstance(raw, dict):
        raise UserError(f"{where}: a schedule is a mapping with one of {list(_SCHEDULE_KINDS)}")
    unknown = sorted(set(raw) - _SCHEDULE_FIELDS)
    if unknown:
        raise UserError(f"{where}: unknown schedule field(s) {unknown}; allowed: {sorted(_SCHEDULE_FIELDS)}")
    kinds = [k for k in _SCHEDULE_KINDS if raw.get(k) is not None]
    if len(kinds) != 1:
        raise UserError(f"{where}: give exactly one of {list(_SCHEDULE_KINDS)}, got {kinds or 'none'}")
    kwargs = dict(raw)
    if "interval" in kwargs:
        kwargs["interval"] = dt.timedelta(seconds=float(kwargs["interval"]))
    try:
        return Schedule(**kwargs)
    except (ValueError, TypeError) as exc:
        raise UserError(f"{where}: invalid schedule {raw}: {exc}") from None


def _load_flow(entrypoint: str, root: Path, where: str) -> Any:
    from prefect.flows import load_flow_from_entrypoint

    if ":" not in entrypoint:
        raise UserError(f"{where}.entrypoint must look like flows/optimize.py:optimize, got {entrypoint!r}")
    path, func = entrypoint.rsplit(":", 1)
    file = (root / path).resolve()
    if not file.is_file():
        raise UserError(f"{where}.entrypoint: {path} does not exist (relative to {root})")
    try:
        return load_flow_from_entrypoint(f"{file}:{func}", use_placeholder_flow=False)
    except Exception as exc:  # MissingFlowError, ScriptError
        raise UserError(f"{where}.entrypoint {entrypoint!r}: {exc}") from None


def _check_parameters(flow: Any, params: dict[str, Any], root: Path, where: str) -> None:
    import inspect

    accepted = set(inspect.signature(flow.fn).parameters)
    unknown = sorted(set(params) - accepted)
    if unknown:
        raise UserError(f"{where}.parameters: {unknown} not accepted by flow {flow.name!r}; it takes {sorted(accepted)}")
    jobs = params.get("jobs")
    if jobs is not None:  # the intunex flow's jobs file
        from ingestion.cluster.jobs import load_jobs

        load_jobs(Path(jobs) if Path(jobs).is_absolute() else root / jobs)
    config = params.get("config")
    if config is not None:
        from optimizers.spec import load_spec

        need = {"seraph": "rl", "intune": "ingestion"}.get(flow.name)
        path = Path(config) if Path(config).is_absolute() else root / config
        load_spec(path, need=need)  # type: ignore[arg-type]


def load_deployments(path: Path, root: Path | None = None) -> list[DeploymentEntry]:
    """Parse and check every deployment in a ``prefect.yaml``; entrypoints and config
    paths are relative to ``root`` (default: the file's folder, as ``prefect deploy`` has it)."""
    if not path.is_file():
        raise UserError(f"{path} does not exist; run from the project root or pass --prefect-file")
    doc = yaml.safe_load(path.read_text()) or {}
    raw = doc.get("deployments")
    if not isinstance(raw, list) or not raw:
        raise UserError(f"{path}: needs a non-empty 'deployments:' list")
    root = (root or path.resolve().parent).resolve()
    out: list[DeploymentEntry] = []
    for i, d in enumerate(raw):
        where = f"{path}: deployments[{i}]"
        if not isinstance(d, dict) or not d.get("name") or not d.get("entrypoint"):
            raise UserError(f"{where}: each deployment needs 'name' and 'entrypoint'")
        where = f"{path}: deployment {d['name']!r}"
        flow = _load_flow(str(d["entrypoint"]), root, where)
        params = dict(d.get("parameters") or {})
        _check_parameters(flow, params, root, where)
        schedules = [_schedule(s, f"{where}.schedules[{j}]") for j, s in enumerate(d.get("schedules") or [])]
        out.append(
            DeploymentEntry(
                name=str(d["name"]),
                entrypoint=str(d["entrypoint"]),
                flow=flow,
                parameters=params,
                schedules=schedules,
                description=d.get("description"),
                tags=list(d.get("tags") or []),
            )
        )
    return out
