"""What a user asks Seraph for: one frozen request model, the one definition of its fields.

:class:`SeraphRequest` holds each field's type, default, description and check. The CLI's
``trainwise rl tune`` flags and help are generated from it (``trainwise.cli.model_flags``),
a workload file's ``rl:`` section is validated by it (``optimizers.spec.RLSpec`` adds the
flow's comparison runs), and the flows take it as their typed parameter. The few names a
front end spells otherwise are in :data:`RENAMES`.

A failed check raises :class:`~core.request_model.RequestError`, which names the request's
field (``objective``) and the problem; each front end re-labels the field as its user wrote
it (``--objective`` on the command line, ``rl.objective`` in a workload file).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Annotated, Any, Callable, ClassVar, Mapping

from pydantic import ConfigDict, Field, JsonValue, PlainSerializer, PlainValidator, ValidationInfo, WithJsonSchema
from pydantic import field_validator

from core.errors import UserError
from core.request_model import Rename, Renames, RequestError, RequestModel, check_with
from optimizers.seraph.baseline import STATIC_DEFAULT_CONFIG, baseline_of, parse_baseline
from serverless.run_shape import RunShape, RunShapeError
from optimizers.seraph.defaults import DEFAULT_STEPS_PER_ENV
from optimizers.seraph.objectives import OBJECTIVES, Objective
from serverless.architectures import ARCHITECTURES, DEFAULT_ARCHITECTURE
from serverless.backends import check_backend_options, check_tunable_backend, tunable_backends

if TYPE_CHECKING:  # the fault injector loads numpy; the CLI imports this module to build its help
    from serverless.backends.faults import FaultSpec

__all__ = ["MIN_MAX_STEPS", "RENAMES", "RequestError", "SeraphRequest", "parse_baseline_config", "parse_faults"]

#: The smallest step cap a request may set: a pilot alone runs several thousand steps.
MIN_MAX_STEPS = 1000

#: Where a front end names a request field otherwise than the model does (the one table).
RENAMES = Renames(
    env_id=Rename(flag="--env"),
    retune=Rename(flag="--no-retune"),
    faults=Rename(flag="--inject-faults", key="inject_faults"),
)


def parse_faults(text: Any) -> "FaultSpec | None":
    """A fault spec from its text form (``--inject-faults``, ``rl.inject_faults``, a stored
    request), parsed by :meth:`~serverless.backends.faults.FaultSpec.parse`; a spec passes,
    None stays None; a bad one is a :class:`RequestError` on ``faults``."""
    try:
        return _faults(text)
    except ValueError as exc:
        raise RequestError("faults", str(exc)) from None


def parse_baseline_config(text: Any) -> RunShape:
    """A baseline configuration from its text form (``--baseline-config``, ``rl.baseline_config``)
    or its JSON object (a stored request); a bad one is a :class:`RequestError` on ``baseline_config``."""
    try:
        return _baseline(text)
    except ValueError as exc:
        raise RequestError("baseline_config", str(exc)) from None


def _faults(value: Any) -> "FaultSpec | None":
    from serverless.backends.faults import FaultSpec

    if value is None or isinstance(value, FaultSpec):
        return value
    return check_with(FaultSpec.parse, value, named="fault spec")


def _baseline(value: Any) -> RunShape:
    """A baseline from a shape, its JSON object or its text; a shape's error is this field's problem."""
    try:
        return baseline_of(value) if isinstance(value, RunShape) else parse_baseline(_baseline_text(value))
    except RunShapeError as exc:
        raise ValueError(str(exc)) from None


def _baseline_text(value: Any) -> str:
    if isinstance(value, Mapping):  # its JSON object (to_dict's): the same keys as the text, whole numbers
        unknown = sorted(map(str, set(value) - {"actors", "memory_mb", "batch", "steps_per_env"}))
        if unknown:
            raise ValueError(f"unknown key(s) {unknown}; allowed: actors, memory_mb, batch, steps_per_env")
        if not all(isinstance(v, int) and not isinstance(v, bool) for v in value.values()):
            raise ValueError(f"must map actors, memory_mb, batch[, steps_per_env] to whole numbers, got {dict(value)!r}")
        value = ",".join(f"{key}={number}" for key, number in value.items())
    if not isinstance(value, str):
        raise ValueError(f"must be 'actors=A,memory=M,batch=B[,steps_per_env=N]', got {value!r}")
    return value


#: A fault spec: parsed from its text, written back as its text.
Faults = Annotated[
    Any, PlainValidator(_faults), PlainSerializer(lambda f: None if f is None else f.describe(), when_used="json"),
    WithJsonSchema({"anyOf": [{"type": "string"}, {"type": "null"}]}),
]
#: A baseline configuration: parsed from its text or its JSON object, written as the object.
Baseline = Annotated[
    RunShape, PlainValidator(_baseline), PlainSerializer(lambda b: b.to_dict(), when_used="json"),
    WithJsonSchema({"anyOf": [{"type": "string"}, {"type": "object"}]}),
]


class SeraphRequest(RequestModel):
    """Train ``env_id`` to ``target_reward`` for ``objective`` under the constraints."""

    model_config = ConfigDict(alias_generator=RENAMES.key, title="SeraphRequest")
    renames: ClassVar[Renames] = RENAMES
    what: ClassVar[str] = "Seraph request"
    positional: ClassVar[tuple[str, ...]] = ("env_id", "target_reward")
    #: The fields a registry names the values of, read when asked (a registration made after import counts).
    choices: ClassVar[dict[str, Callable[[], tuple[str, ...]]]] = {
        "objective": OBJECTIVES.names, "backend": tunable_backends, "architecture": ARCHITECTURES.names,
    }

    env_id: str = Field("CartPole-v1", description=(
        "a Gymnasium env id (Box observations; Discrete or Box actions), e.g. CartPole-v1, or your own env as "
        "module:EnvId (the module, importable from PYTHONPATH, registers EnvId)"))
    target_reward: float = Field(description="the mean recent episode return at which training counts as done")
    objective: str = Field("cost", description="what to optimise: least cost, least time, or a weighted balance "
                           "(Lambda Power Tuning's names)")
    weight: float = Field(0.5, description="balanced only: the weight of cost in [0, 1] (1 - weight goes to time)")
    deadline_s: float | None = Field(None, description="constraint: the modelled time to the target must not exceed this")
    budget_usd: float | None = Field(None, description="constraint: the modelled cost to the target must not exceed this")
    backend: str = Field("local", description="where rollout functions run: the local Lambda emulator, Ray or AWS Lambda")
    architecture: str = Field(DEFAULT_ARCHITECTURE, description="the Lambda architecture priced")
    seed: int = Field(0, description="the training seed")
    max_steps: int | None = Field(None, description="env steps after which training gives up (default: 3x the env "
                                  "preset's)")
    steps_per_env: int | None = Field(None, description=(
        "fix the rollout layout: envs of about N steps each, so the actor count does not change learning (0: one env "
        f"per actor; default: Seraph chooses between the baseline's layout and {DEFAULT_STEPS_PER_ENV})"))
    baseline_config: Baseline = Field(STATIC_DEFAULT_CONFIG, description=(
        "the configuration you would otherwise run, always a candidate: 'actors=A,memory=M,batch=B[,steps_per_env=N]' "
        f"(default: the static default, {STATIC_DEFAULT_CONFIG.describe()}); Seraph leaves it only for a predicted "
        "saving that holds with its model's error added"))
    replan_every: int = Field(3, description="re-plan every this many training iterations")
    retune: bool = Field(True, description="re-plan the configuration during training (off: keep the first plan)")
    faults: Faults = Field(None, description=(
        "inject faults into the rollout functions, e.g. errors=0.1,timeouts=0.05,stragglers=0.1,throttle=0.1,seed=1 "
        "(rates in [0, 1); optional slowdown=K for stragglers, timeout_s=T for the billed function timeout)"))
    env_kwargs: dict[str, JsonValue] = Field(default_factory=dict, description=(
        "keyword arguments for gymnasium.make, a JSON object of plain values such as {\"speed\": 0.2}"))
    backend_options: dict[str, JsonValue] = Field(default_factory=dict, description=(
        "the backend's own options, as `rl train` takes them (lambda: {lambda_config: FILE})"))

    # -- the checks: each raises what is wrong (pydantic names the field) --------------------
    @field_validator("env_id", "objective", "backend", "architecture")
    @classmethod
    def _registered(cls, v: str, info: ValidationInfo) -> str:
        """A name its registry knows (:data:`_REGISTERED`), else its registry's error."""
        check_with(_REGISTERED[info.field_name], v)
        return v

    @field_validator("weight")
    @classmethod
    def _a_weight(cls, v: float) -> float:
        if not 0.0 <= v <= 1.0:
            raise ValueError(f"must be between 0 and 1 (the weight of cost in 'balanced'), got {v}")
        return v

    @field_validator("deadline_s", "budget_usd")
    @classmethod
    def _positive_or_none(cls, v: float | None) -> float | None:
        if v is not None and not v > 0:
            raise ValueError(f"must be a positive number, got {v}")
        return v

    @field_validator("seed")
    @classmethod
    def _a_seed(cls, v: int) -> int:
        if not 0 <= v < 2**32:
            raise ValueError(f"must be between 0 and 2**32 - 1, got {v}")
        return v

    @field_validator("max_steps")
    @classmethod
    def _enough_steps(cls, v: int | None) -> int | None:
        if v is not None and v < MIN_MAX_STEPS:
            raise ValueError(f"must be at least {MIN_MAX_STEPS} env steps, got {v}")
        return v

    @field_validator("steps_per_env")
    @classmethod
    def _a_layout(cls, v: int | None) -> int | None:
        if v is not None and v < 0:
            raise ValueError(f"must be >= 0 (0 = one env per actor), got {v}")
        return v

    @field_validator("replan_every")
    @classmethod
    def _an_interval(cls, v: int) -> int:
        if v < 1:
            raise ValueError(f"must be >= 1 iteration, got {v}")
        return v

    @field_validator("env_kwargs", mode="before")
    @classmethod
    def _plain_env_kwargs(cls, v: Any) -> Any:
        """JSON text or a mapping of plain values (``serverless.envs.parse_env_kwargs``)."""
        from serverless.envs import parse_env_kwargs

        if v is None or isinstance(v, (str, dict)):
            return check_with(parse_env_kwargs, v)
        return v  # not a mapping: pydantic's type check names it

    @field_validator("backend_options")
    @classmethod
    def _declared_options(cls, v: dict[str, JsonValue], info: ValidationInfo) -> dict[str, JsonValue]:
        """Options the backend declares, each of its type (``BackendEntry.options``)."""
        if "backend" in info.data:  # a bad backend is its own error
            check_with(check_backend_options, info.data["backend"], v)
        return v

    # -- what the request implies ------------------------------------------------------------
    def check_env(self) -> None:
        """That ``env_id`` (with ``env_kwargs``) makes an env the trainer supports (loads gymnasium and makes it)."""
        from serverless.envs import inspect_env

        try:
            inspect_env(self.env_id, env_kwargs=self.env_kwargs)
        except UserError as exc:
            raise RequestError("env_id", str(exc)) from None

    def function_backend(self, faults: "FaultSpec | None" = None) -> Any:
        """A new backend of this request's kind, built with its options (and ``faults``)."""
        from serverless.backends import make_backend

        return make_backend(self.backend, faults=faults, **self.backend_options)

    def objective_obj(self) -> Objective:
        return OBJECTIVES.make(self.objective, self.weight)

    @property
    def faults_text(self) -> str | None:
        """The fault spec's text form (what ``--inject-faults`` takes), or None."""
        return None if self.faults is None else self.faults.describe()


def _check_architecture(name: str) -> None:
    if name not in ARCHITECTURES:
        raise UserError(ARCHITECTURES.unknown(name))


def _check_env_id(env_id: str) -> None:
    """A Gymnasium registry id, or the user's own ``module:EnvId`` (importable, registers EnvId):
    ``serverless.envs.check_env_id``, the trainer's own check, with its closest ids as a hint."""
    from serverless.envs import check_env_id

    check_env_id(env_id)


#: The check of each field that names a registered thing: a Gymnasium env, a Seraph
#: objective (``OBJECTIVES``), a backend the tuner runs on (``serverless.backends.BACKENDS``,
#: ``tunable``), a Lambda architecture (``serverless.architectures.ARCHITECTURES``).
_REGISTERED: dict[str, Callable[[str], Any]] = {
    "env_id": _check_env_id, "objective": OBJECTIVES.get, "backend": check_tunable_backend,
    "architecture": _check_architecture,
}
