"""Function backends: the local Lambda emulator, Ray actors, AWS Lambda.

All implement :class:`serverless.invocation.FunctionBackend`. Each is one entry of
:data:`BACKENDS`, which declares how to build it, the labels of the figures it
reports and the options it takes; the CLI (``rl train --backend``, its per-backend
flags), the workload spec (``rl.backend``) and the trainer's check read it. Build
one with :func:`make_backend`. Adding a backend is one module with the class plus one
``BACKENDS.register(...)`` (``docs/extending.md``); :func:`serverless.backends.checker.check_backend`
checks it keeps the contract.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable

from core.errors import UserError
from core.json_edge import JsonObject
from core.registry import Registry
from serverless.invocation import FigureLabel, FunctionBackend


@dataclass(frozen=True)
class BackendOption:
    """One option a backend's factory takes: its keyword, type and help.

    The CLI offers it as ``--<backend>-<name>`` (``--ray-address``); a name that already
    starts with the backend's name is not prefixed twice (``lambda_config`` ->
    ``--lambda-config``).
    """

    name: str
    type: type
    help: str

    def flag(self, backend: str) -> str:
        name = self.name if self.name.startswith(f"{backend}_") else f"{backend}_{self.name}"
        return "--" + name.replace("_", "-")


@dataclass(frozen=True)
class BackendEntry:
    """A registered function backend.

    ``clock`` labels the batch time it reports (``InvokeBatch.lambda_s_label``):
    ``modelled`` when it computes Lambda's time rather than measuring it. ``billing``
    lists the labels its billing records may carry. ``clock_name`` names that time in a
    summary (Ray's batch time is not time on Lambda). ``tunable`` says Seraph's tuner
    (``rl tune``, the ``seraph`` flow) may profile and train with it, not only ``rl train``.
    """

    name: str
    factory: Callable[..., FunctionBackend]
    clock: FigureLabel
    billing: tuple[FigureLabel, ...]
    description: str
    options: tuple[BackendOption, ...] = ()
    clock_name: str = "time on Lambda"
    tunable: bool = True

    def option(self, name: str) -> BackendOption:
        for opt in self.options:
            if opt.name == name:
                return opt
        allowed = ", ".join(o.name for o in self.options) or "none"
        raise UserError(f"function backend {self.name!r} takes no option {name!r}; its options: {allowed}")


BACKENDS: Registry[BackendEntry] = Registry("function backend")


def make_backend(name: str, *, faults: Any = None, **options: Any) -> FunctionBackend:
    """The backend registered as ``name``, built with ``options``: each one of the entry's
    declared ``options`` (another is a UserError naming those it takes).

    ``faults`` (a :class:`~serverless.backends.faults.FaultSpec` or its string form) wraps
    the backend in the fault injector; every front end (``rl train``, ``rl tune``, the
    workload file's ``rl.inject_faults``, the Prefect tasks) builds its backend here."""
    entry = BACKENDS.get(name)
    for key in options:
        entry.option(key)
    return with_faults(entry.factory(**options), faults)


def with_faults(backend: Any, faults: Any) -> Any:
    """``backend`` wrapped in the fault injector for ``faults`` (a ``FaultSpec`` or its
    string form), or ``backend`` itself when ``faults`` is None."""
    if faults is None:
        return backend
    from serverless.backends.faults import FaultInjectingBackend, FaultSpec

    return FaultInjectingBackend(backend, faults if isinstance(faults, FaultSpec) else FaultSpec.parse(faults))


def tunable_backends() -> tuple[str, ...]:
    """The backends Seraph's tuner runs on."""
    return tuple(e.name for e in BACKENDS.entries() if e.tunable)


def check_backend_options(name: str, options: JsonObject) -> None:
    """A UserError unless every one of ``options`` is an option backend ``name`` declares,
    with a value of its type."""
    if not isinstance(options, dict):
        raise UserError(f"must be a mapping of option names to values, got {options!r}")
    entry = BACKENDS.get(name)
    for key, value in options.items():
        opt = entry.option(key)
        if not isinstance(value, opt.type) or isinstance(value, bool) and opt.type is not bool:
            raise UserError(f"option {key!r} of function backend {name!r} must be a {opt.type.__name__}, got {value!r}")


def check_tunable_backend(name: str) -> str:
    """``name`` if Seraph's tuner runs on it, else a UserError listing the backends it runs on."""
    allowed = ", ".join(tunable_backends())
    if name not in BACKENDS:
        raise UserError(f"unknown function backend {name!r}; allowed: {allowed}")
    if not BACKENDS.get(name).tunable:
        raise UserError(f"function backend {name!r} runs `rl train` only, not the tuner; allowed: {allowed}")
    return name


# -- the built-in backends: factories import lazily (Ray and boto3 are heavy) ----------------


def _local(**options: Any) -> FunctionBackend:
    from serverless.backends.local import LocalBackend

    return LocalBackend(**options)


def _ray(address: str | None = None) -> FunctionBackend:
    from serverless.backends.ray_backend import RayBackend

    return RayBackend(address=address)


def _lambda(lambda_config: str | None = None) -> FunctionBackend:
    try:
        from serverless.backends.lambda_backend import LambdaBackend
    except ImportError as exc:
        raise UserError(f"the lambda backend is not available: {exc}") from None
    return LambdaBackend.from_config_file(lambda_config or ".trainwise/aws.json")


BACKENDS.register("local", BackendEntry(
    name="local", factory=_local, clock="modelled", billing=("modelled",),
    description="the local Lambda emulator: worker processes throttled to each memory size's CPU share",
    options=(BackendOption("max_workers", int, "emulator worker processes (default: this machine's cores)"),),
))
BACKENDS.register("ray", BackendEntry(
    name="ray", factory=_ray, clock="measured", billing=("measured",),
    description="Ray actors that keep their envs warm, on a local Ray or a cluster",
    options=(BackendOption("address", str, "join this Ray cluster (default: start Ray locally)"),),
    clock_name="run time, Ray rollouts",
))
BACKENDS.register("lambda", BackendEntry(
    name="lambda", factory=_lambda, clock="measured", billing=("billed", "measured"),
    description="AWS Lambda: the deployed rollout function, billed figures from its REPORT lines",
    options=(BackendOption("lambda_config", str, "AWS backend config (default .trainwise/aws.json)"),),
))
