"""What a user asks Seraph for: one frozen request, validated once.

The CLI (``trainwise rl tune``), the workload spec (``rl:`` in YAML) and Python callers all
build a :class:`SeraphRequest`; its checks are the one validation path. A failed check
raises :class:`RequestError`, which names the request's field (``objective``) and the
problem; each front end re-labels the field as its user wrote it (``--objective`` on the
command line, ``rl.objective`` in a workload file) with :meth:`RequestError.named`.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, field, fields
from typing import TYPE_CHECKING, Any, ClassVar

from core.errors import UserError
from serverless.architectures import ARCHITECTURES
from serverless.backends import check_backend_options, check_tunable_backend
from optimizers.seraph.baseline import STATIC_DEFAULT_CONFIG, BaselineConfig, BaselineConfigError
from optimizers.seraph.objectives import OBJECTIVES, Objective

if TYPE_CHECKING:  # the fault injector loads numpy; the CLI imports this module to build its help
    from serverless.backends.faults import FaultSpec

#: The smallest step cap a request may set: a pilot alone runs several thousand steps.
MIN_MAX_STEPS = 1000


class RequestError(UserError):
    """A request field the checks refused: ``field`` and what is wrong with it."""

    def __init__(self, field: str, problem: str) -> None:
        self.field = field
        self.problem = problem
        super().__init__(f"{field}: {problem}")

    def named(self, name: str) -> UserError:
        """The same error with the field called ``name`` (as the user wrote it)."""
        return UserError(f"{name}: {self.problem}")


@dataclass(frozen=True)
class SeraphRequest:
    """Train ``env_id`` to ``target_reward`` for ``objective`` under the constraints."""

    env_id: str
    target_reward: float
    objective: str = "cost"
    weight: float = 0.5  # balanced only: the weight of cost (1 - weight goes to time)
    deadline_s: float | None = None  # the modelled time to the target must not exceed this
    budget_usd: float | None = None  # the modelled cost to the target must not exceed this
    backend: str = "local"
    architecture: str = "x86_64"
    seed: int = 0
    max_steps: int | None = None  # env-step cap; None: three times the env preset's
    # env slot length; None: Seraph chooses between the baseline's layout and slots of
    # DEFAULT_STEPS_PER_ENV (optimizers.seraph.layout); 0: one env per function
    steps_per_env: int | None = None
    # the configuration the user would otherwise run: always a candidate (optimizers.seraph.baseline)
    baseline_config: BaselineConfig = STATIC_DEFAULT_CONFIG
    replan_every: int = 3  # iterations between re-plans
    retune: bool = True  # re-plan during training
    faults: "FaultSpec | None" = None  # faults injected into the rollout functions (text: parse_faults)
    env_kwargs: dict[str, Any] = field(default_factory=dict)  # gymnasium.make(env_id, **env_kwargs)
    backend_options: dict[str, Any] = field(default_factory=dict)  # the backend's own (lambda_config, ...)

    checked_fields: ClassVar[tuple[str, ...]] = (
        "objective", "weight", "deadline_s", "budget_usd", "backend", "architecture", "target_reward",
        "max_steps", "replan_every", "steps_per_env", "seed", "baseline_config", "faults", "env_kwargs",
        "backend_options",
    )

    def __post_init__(self) -> None:
        for name in self.checked_fields:
            problem = getattr(self, f"_check_{name}")()
            if problem:
                raise RequestError(name, problem)

    # -- the checks: each returns what is wrong, or None -------------------------------------
    def _check_objective(self) -> str | None:
        try:
            OBJECTIVES.get(self.objective)
        except UserError as exc:
            return str(exc)
        return None

    def _check_weight(self) -> str | None:
        ok = isinstance(self.weight, (int, float)) and math.isfinite(self.weight) and 0.0 <= self.weight <= 1.0
        return None if ok else f"must be between 0 and 1 (the weight of cost in 'balanced'), got {self.weight}"

    def _positive_or_none(self, value: float | None) -> str | None:
        ok = value is None or (isinstance(value, (int, float)) and math.isfinite(value) and value > 0)
        return None if ok else f"must be a positive number, got {value}"

    def _check_deadline_s(self) -> str | None:
        return self._positive_or_none(self.deadline_s)

    def _check_budget_usd(self) -> str | None:
        return self._positive_or_none(self.budget_usd)

    def _check_backend(self) -> str | None:
        """A registered backend the tuner runs on (``serverless.backends.BACKENDS``, ``tunable``)."""
        try:
            check_tunable_backend(self.backend)
        except UserError as exc:
            return str(exc)
        return None

    def _check_backend_options(self) -> str | None:
        """Options the backend declares, each of its type (``BackendEntry.options``)."""
        try:
            check_backend_options(self.backend, self.backend_options)
        except UserError as exc:
            return str(exc)
        return None

    def _check_architecture(self) -> str | None:
        """A registered Lambda architecture (``serverless.architectures.ARCHITECTURES``)."""
        return None if self.architecture in ARCHITECTURES else ARCHITECTURES.unknown(self.architecture)

    def _check_target_reward(self) -> str | None:
        ok = isinstance(self.target_reward, (int, float)) and math.isfinite(self.target_reward)
        return None if ok else f"must be a finite number, got {self.target_reward}"

    def _check_max_steps(self) -> str | None:
        if self.max_steps is None or self.max_steps >= MIN_MAX_STEPS:
            return None
        return f"must be at least {MIN_MAX_STEPS} env steps, got {self.max_steps}"

    def _check_replan_every(self) -> str | None:
        return None if self.replan_every >= 1 else f"must be >= 1 iteration, got {self.replan_every}"

    def _check_steps_per_env(self) -> str | None:
        ok = self.steps_per_env is None or self.steps_per_env >= 0
        return None if ok else f"must be >= 0 (0 = one env per actor), got {self.steps_per_env}"

    def _check_baseline_config(self) -> str | None:
        if isinstance(self.baseline_config, BaselineConfig):
            return None
        return f"must be 'actors=A,memory=M,batch=B[,steps_per_env=N]', got {self.baseline_config!r}"

    def _check_seed(self) -> str | None:
        return None if 0 <= self.seed < 2**32 else f"must be between 0 and 2**32 - 1, got {self.seed}"

    def _check_faults(self) -> str | None:
        """None, or a parsed :class:`~serverless.backends.faults.FaultSpec` (text: :func:`parse_faults`)."""
        if self.faults is None:
            return None
        from serverless.backends.faults import FaultSpec

        return None if isinstance(self.faults, FaultSpec) else f"must be a parsed fault spec, got {self.faults!r}"

    def _check_env_kwargs(self) -> str | None:
        """A JSON object of plain values (``serverless.envs.parse_env_kwargs``)."""
        from serverless.envs import parse_env_kwargs

        try:
            parse_env_kwargs(self.env_kwargs)
        except UserError as exc:
            return str(exc)
        return None if isinstance(self.env_kwargs, dict) else f"must be a JSON object, got {self.env_kwargs!r}"

    def check_env(self) -> None:
        """That ``env_id`` (with ``env_kwargs``) names a Gymnasium env the trainer supports (loads gymnasium)."""
        from serverless.envs import inspect_env

        try:
            inspect_env(self.env_id, env_kwargs=self.env_kwargs)
        except UserError as exc:
            raise RequestError("env_id", str(exc)) from None

    # -- what the request implies ------------------------------------------------------------
    def function_backend(self, faults: "FaultSpec | None" = None) -> Any:
        """A new backend of this request's kind, built with its options (and ``faults``)."""
        from serverless.backends import make_backend

        return make_backend(self.backend, faults=faults, **self.backend_options)

    def objective_obj(self) -> Objective:
        return OBJECTIVES.make(self.objective, self.weight)

    def to_dict(self) -> dict[str, Any]:
        return {**asdict(self), "baseline_config": self.baseline_config.as_dict(), "faults": self.faults_text}

    @property
    def faults_text(self) -> str | None:
        """The fault spec's text form (what ``--inject-faults`` takes), or None."""
        return None if self.faults is None else self.faults.describe()

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> "SeraphRequest":
        known = {f.name for f in fields(cls)}
        unknown = sorted(set(data) - known)
        if unknown:
            raise UserError(f"unknown Seraph request field(s) {unknown}; allowed: {sorted(known)}")
        base = data.get("baseline_config")
        if isinstance(base, dict):
            data = {**data, "baseline_config": BaselineConfig(**base)}
        elif isinstance(base, str):
            data = {**data, "baseline_config": parse_baseline_config(base)}
        if isinstance(data.get("faults"), str):
            data = {**data, "faults": parse_faults(data["faults"])}
        return cls(**data)


def parse_faults(text: str | None) -> "FaultSpec | None":
    """The text form of a fault spec (``--inject-faults``, ``rl.inject_faults``,
    :meth:`SeraphRequest.from_dict`) parsed by :meth:`~serverless.backends.faults.FaultSpec.parse`,
    or None; a bad one is a :class:`RequestError` on ``faults``."""
    if text is None:
        return None
    from serverless.backends.faults import FaultSpec

    try:
        return FaultSpec.parse(text)
    except UserError as exc:
        raise RequestError("faults", str(exc).removeprefix("fault spec: ")) from None


def parse_baseline_config(text: str) -> BaselineConfig:
    """The text form of a baseline configuration (``--baseline-config``, ``rl.baseline_config``,
    :meth:`SeraphRequest.from_dict`), parsed; a bad one is a :class:`RequestError` on
    ``baseline_config``."""
    try:
        return BaselineConfig.parse(text)
    except BaselineConfigError as exc:
        raise RequestError("baseline_config", str(exc)) from None
