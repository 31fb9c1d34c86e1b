"""Read ``prefect.yaml`` into deployments that ``trainwise serve`` can serve.

One source of truth: the same file works with ``prefect deploy`` (a process work pool
and its worker, which runs the file's pull steps before each flow run) and with
``trainwise serve`` (one process serves every deployment; pull steps and work pools do
not apply). Loading checks what a typo would otherwise hide until the schedule fires:
the entrypoint names an existing flow, the parameters fit that flow's signature, the
config files they name exist and validate (a typed ``workload`` too), every schedule
parses, a concurrency limit is a count or ``{limit, collision_strategy}``, a work pool given
has a name, and every pull step names an importable function. A key the file or a deployment
may not carry (a typo, or a ``prefect deploy`` feature that ``trainwise serve`` would not apply,
such as ``triggers``) is an error naming it and the keys allowed, not silently dropped.

:func:`enter_checkout` is the pull step ``prefect.yaml`` gives the worker: it enters the
trainwise checkout, so entrypoints and relative config paths resolve there.
"""

from __future__ import annotations

import datetime as dt
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from core.errors import UserError
from core.json_edge import JsonObject

#: The checkout this module was imported from (an editable install's project root).
CHECKOUT = Path(__file__).resolve().parents[1]

_SCHEDULE_KINDS = ("cron", "interval", "rrule")
#: the keys of prefect.yaml itself (``definitions`` holds the YAML anchors deployments share)
_FILE_KEYS = {"name", "prefect-version", "build", "push", "pull", "deployments", "definitions"}
#: the keys of one deployment that serve applies (``work_pool`` and ``pull`` are for ``prefect deploy``'s worker)
_DEPLOYMENT_KEYS = {"name", "entrypoint", "description", "version", "tags", "parameters", "schedules", "paused",
                    "concurrency_limit", "work_pool", "pull"}
_CONCURRENCY_KEYS = {"limit", "collision_strategy", "grace_period_seconds"}
_SCHEDULE_FIELDS = {*_SCHEDULE_KINDS, "timezone", "active", "parameters", "slug", "day_or", "anchor_date"}


@dataclass
class DeploymentEntry:
    name: str
    entrypoint: str
    flow: Any  # prefect.Flow
    parameters: JsonObject = field(default_factory=dict)
    schedules: list[Any] = field(default_factory=list)  # prefect.schedules.Schedule
    description: str | None = None
    tags: list[str] = field(default_factory=list)
    work_pool: str | None = None
    pull: list[JsonObject] = field(default_factory=list)
    concurrency_limit: Any = None  # prefect.client.schemas.objects.ConcurrencyLimitConfig
    version: str | None = None
    paused: bool | None = None

    @property
    def schedule_texts(self) -> list[str]:
        out = []
        for s in self.schedules:
            when = s.cron or s.rrule or f"every {s.interval}"
            out.append(f"{when} ({s.timezone or 'UTC'}){'' if s.active else ' inactive'}")
        return out

    @property
    def concurrency_text(self) -> str:
        c = self.concurrency_limit
        if c is None:
            return "unlimited"
        more = "a new one waits" if c.collision_strategy.value == "ENQUEUE" else "a new one is cancelled"
        return f"at most {c.limit} at a time ({more}, {c.collision_strategy.value})"

    def to_runner_deployment(self) -> Any:
        return self.flow.to_deployment(
            name=self.name,
            parameters=self.parameters,
            schedules=self.schedules,
            description=self.description,
            tags=self.tags,
            concurrency_limit=self.concurrency_limit,
            version=self.version,
            paused=self.paused,
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


def _check_keys(raw: JsonObject, allowed: set[str], where: str) -> None:
    unknown = sorted(map(str, set(raw) - allowed))
    if unknown:
        raise UserError(f"{where}: unknown key(s) {unknown}; allowed: {sorted(allowed)}")


def _concurrency_limit(raw: Any, where: str) -> Any:
    """``concurrency_limit: N`` or ``{limit: N, collision_strategy: ENQUEUE|CANCEL_NEW}`` (as
    ``prefect deploy`` reads it): how many runs of the deployment may run at once, and what
    happens to a run that finds them all taken (queued, or cancelled)."""
    from prefect.client.schemas.objects import ConcurrencyLimitConfig, ConcurrencyLimitStrategy

    if raw is None:
        return None
    strategies = [s.value for s in ConcurrencyLimitStrategy]
    spec = {"limit": raw} if isinstance(raw, int) and not isinstance(raw, bool) else raw
    if not isinstance(spec, dict):
        raise UserError(f"{where}.concurrency_limit: a count or {{limit: N, collision_strategy: one of {strategies}}}, "
                        f"got {raw!r}")
    _check_keys(spec, _CONCURRENCY_KEYS, f"{where}.concurrency_limit")
    limit = spec.get("limit")
    if not isinstance(limit, int) or isinstance(limit, bool) or limit < 1:
        raise UserError(f"{where}.concurrency_limit.limit: a whole number of runs, at least 1, got {limit!r}")
    strategy = spec.get("collision_strategy", "ENQUEUE")
    if strategy not in strategies:
        raise UserError(f"{where}.concurrency_limit.collision_strategy: one of {strategies}, got {strategy!r}")
    try:
        return ConcurrencyLimitConfig(**{**spec, "collision_strategy": strategy})
    except ValueError as exc:  # grace_period_seconds outside 60..86400
        raise UserError(f"{where}.concurrency_limit: {str(exc).splitlines()[-1].strip()}") from None


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


def _check_parameters(flow: Any, params: JsonObject, root: Path, where: str) -> None:
    import inspect

    accepted = set(inspect.signature(flow.fn).parameters)
    unknown = sorted(set(params) - accepted)
    if unknown:
        raise UserError(f"{where}.parameters: {unknown} not accepted by flow {flow.name!r}; it takes {sorted(accepted)}")
    if flow.name == "intunex":  # the cluster request, as the run form would send it, and its jobs file
        _check_cluster_request(params.get("request"), root, where)
    need = {"seraph": "rl", "intune": "ingestion"}.get(flow.name)
    config = params.get("config")
    if config is not None:
        from optimizers.spec import load_spec

        path = Path(config) if Path(config).is_absolute() else root / config
        load_spec(path, need=need)  # type: ignore[arg-type]
    workload = params.get("workload")
    if workload is not None:  # a typed workload, as the run form would send it
        from optimizers.spec import parse_spec

        spec = parse_spec(workload, f"{where}.parameters.workload")
        if need is not None and getattr(spec, need) is None:
            raise UserError(f"{where}.parameters.workload: flow {flow.name!r} needs a '{need}' section")


def _check_cluster_request(raw: Any, root: Path, where: str) -> None:
    from core.request_model import RequestError
    from optimizers.intunex.request import ClusterRequest

    try:
        jobs = (ClusterRequest() if raw is None else ClusterRequest.from_dict(raw)).jobs_file()
    except RequestError as exc:
        raise exc.named(f"{where}.parameters.request.{exc.field}") from None
    from ingestion.cluster.jobs import load_jobs

    load_jobs(jobs if jobs.is_absolute() else root / jobs)


def _work_pool(raw: Any, where: str) -> str | None:
    """The work pool's name (``work_pool: {name: ..., job_variables: {...}}``), if one is given."""
    if raw is None:
        return None
    if not isinstance(raw, dict) or not isinstance(raw.get("name"), str) or not raw["name"]:
        raise UserError(f"{where}.work_pool: a mapping with a 'name' (a process work pool), got {raw!r}")
    if not isinstance(raw.get("job_variables") or {}, dict):
        raise UserError(f"{where}.work_pool.job_variables: a mapping (env, working_dir, ...), got {raw['job_variables']!r}")
    return str(raw["name"])


def _pull_steps(raw: Any, where: str) -> list[JsonObject]:
    """Pull steps: a list of ``{importable.function: {inputs}}``, each function importable here."""
    from prefect.utilities.importtools import import_object

    if raw is None:
        return []
    if not isinstance(raw, list):
        raise UserError(f"{where}.pull: a list of steps such as {{flows.deployments.enter_checkout: {{...}}}}, got {raw!r}")
    for i, step in enumerate(raw):
        if not isinstance(step, dict) or len(step) != 1 or not isinstance(next(iter(step.values())) or {}, dict):
            raise UserError(f"{where}.pull[{i}]: one step is a mapping of one function name to its inputs, got {step!r}")
        name = next(iter(step))
        try:
            import_object(name)
        except (ImportError, AttributeError, ValueError) as exc:
            raise UserError(f"{where}.pull[{i}]: step {name!r} is not an importable function ({exc})") from None
    return list(raw)


def enter_checkout(directory: str | None = None) -> dict[str, str]:
    """Pull step: enter the trainwise checkout the worker runs flows from, so entrypoints and
    relative config paths resolve there.

    ``directory`` (``{{ $TRAINWISE_ROOT }}`` in ``prefect.yaml``, empty when that is unset) or,
    if empty, :data:`CHECKOUT`, the checkout trainwise is installed from (``pip install -e .``).
    Returns ``{"directory": ...}``, as Prefect's own steps do."""
    root = Path(directory).expanduser().resolve() if directory else CHECKOUT
    if not (root / "flows").is_dir() or not (root / "configs").is_dir():
        raise UserError(f"pull step enter_checkout: {root} is not a trainwise checkout (it has no flows/ and configs/); "
                        "set TRAINWISE_ROOT on the worker to the checkout's path")
    os.chdir(root)
    return {"directory": str(root)}


def load_deployments(path: Path, root: Path | None = None) -> list[DeploymentEntry]:
    """Parse and check every deployment in a ``prefect.yaml``; entrypoints and config
    paths are relative to ``root`` (default: the file's folder, as ``prefect deploy`` has it)."""
    if not path.is_file():
        raise UserError(f"{path} does not exist; run from the project root or pass --prefect-file")
    doc = yaml.safe_load(path.read_text()) or {}
    if not isinstance(doc, dict):
        raise UserError(f"{path}: a mapping with a 'deployments:' list, got {type(doc).__name__}")
    _check_keys(doc, _FILE_KEYS, str(path))
    raw = doc.get("deployments")
    if not isinstance(raw, list) or not raw:
        raise UserError(f"{path}: needs a non-empty 'deployments:' list")
    root = (root or path.resolve().parent).resolve()
    pull = _pull_steps(doc.get("pull"), str(path))
    out: list[DeploymentEntry] = []
    for i, d in enumerate(raw):
        if not isinstance(d, dict) or not d.get("name") or not d.get("entrypoint"):
            raise UserError(f"{path}: deployments[{i}]: each deployment needs 'name' and 'entrypoint'")
        out.append(_entry(d, pull, root, f"{path}: deployment {d['name']!r}"))
    return out


def _entry(d: JsonObject, pull: list[JsonObject], root: Path, where: str) -> DeploymentEntry:
    """One deployment, checked; its own ``pull`` replaces the file's, as in ``prefect deploy``."""
    _check_keys(d, _DEPLOYMENT_KEYS, where)
    flow = _load_flow(str(d["entrypoint"]), root, where)
    params = dict(d.get("parameters") or {})
    _check_parameters(flow, params, root, where)
    schedules = [_schedule(s, f"{where}.schedules[{j}]") for j, s in enumerate(d.get("schedules") or [])]
    return DeploymentEntry(
        name=str(d["name"]),
        entrypoint=str(d["entrypoint"]),
        flow=flow,
        parameters=params,
        schedules=schedules,
        description=d.get("description"),
        tags=list(d.get("tags") or []),
        work_pool=_work_pool(d.get("work_pool"), where),
        pull=_pull_steps(d["pull"], where) if "pull" in d else pull,
        concurrency_limit=_concurrency_limit(d.get("concurrency_limit"), where),
        version=None if d.get("version") is None else str(d["version"]),
        paused=_optional_bool(d.get("paused"), f"{where}.paused"),
    )


def _optional_bool(raw: Any, where: str) -> bool | None:
    if raw is None or isinstance(raw, bool):
        return raw
    raise UserError(f"{where}: true or false, got {raw!r}")
