"""Workload specs: the YAML file a user hands to ``trainwise run`` and the flows.

A workload file names an RL job for Seraph (``rl:``), an ingestion pipeline for
InTune (``ingestion:``), or both. It is validated by pydantic *before* any task
runs; a mistake is reported as a :class:`~core.errors.UserError` that names
the file, the field (``rl.target_reward``) and what is allowed. Unknown keys are
errors too (a typo such as ``target_reword`` must not be silently ignored).

Example (``configs/demo.yaml``)::

    name: demo
    rl:
      env_id: CartPole-v1
      target_reward: 150
    ingestion:
      data: {rows: 50000}
      time_budget_s: 30
      baselines: [autotune, heuristic]

Nothing here imports Prefect, torch or TensorFlow, so validation is instant.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any, Literal

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

from core.errors import UserError, field_name

_SLUG = re.compile(r"^[a-z0-9][a-z0-9-]{0,39}$")


class _Strict(BaseModel):
    """Unknown keys are errors; values are validated on assignment too; NaN and infinity are
    not numbers a workload can mean (``.nan`` or ``.inf`` in YAML)."""

    model_config = ConfigDict(extra="forbid", validate_assignment=True, allow_inf_nan=False)


class RLSpec(_Strict):
    """The RL job Seraph tunes: what to train, to which reward, optimising what.

    Types are checked here; values by :class:`~optimizers.seraph.request.SeraphRequest`
    (:meth:`request`), whose errors :func:`parse_spec` names as ``rl.<field>``."""

    env_id: str = Field("CartPole-v1", description="a Gymnasium environment id, or the user's own env as "
                        "'module:EnvId' (the module, importable from PYTHONPATH, registers EnvId)")
    env_kwargs: dict[str, Any] = Field(default_factory=dict, description="keyword arguments for gymnasium.make, "
                                       "plain values (checked by SeraphRequest)")
    target_reward: float = Field(description="mean episode return at which training counts as done")
    max_steps: int | None = Field(
        None, description="environment steps after which training gives up (default: 3x the env preset's)"
    )
    backend: str = Field("local", description="where rollout functions run: a function backend Seraph's tuner "
                         "runs on (serverless.backends.BACKENDS: the local Lambda emulator, Ray or AWS Lambda; "
                         "checked by SeraphRequest)")
    backend_options: dict[str, Any] = Field(default_factory=dict, description="the backend's own options, as "
                                            "`rl train` takes them (lambda: {lambda_config: FILE}; checked by "
                                            "SeraphRequest)")
    architecture: str = Field("x86_64", description="the Lambda architecture priced (serverless.architectures."
                              "ARCHITECTURES; checked by SeraphRequest)")
    objective: str = Field("cost", description="a Seraph objective (optimizers.seraph.objectives.OBJECTIVES): "
                           "least cost, least time, or a weighted balance")
    weight: float = Field(0.5, description="balanced objective: the weight of cost (1 - weight goes to time)")
    deadline_s: float | None = Field(None, description="constraint: finish within this many seconds")
    budget_usd: float | None = Field(None, description="constraint: spend at most this many dollars")
    retune: bool = Field(True, description="re-plan the configuration during training (dynamic re-tuning)")
    replan_every: int = Field(3, description="re-plan every this many training iterations")
    baselines: list[Literal["static"]] = Field(
        default_factory=list,
        description="fixed configurations also trained to the target, for comparison "
        "(static: RLlib's PPO defaults mapped to functions, 2 actors x 1,769 MB, batch 4,000)",
    )
    seed: int = 0
    baseline_config: str | None = Field(
        None,
        description="the configuration you would otherwise run, 'actors=A,memory=M,batch=B[,steps_per_env=N]' "
        "(default: the static default, actors=2,memory=1769,batch=4000,steps_per_env=2000); Seraph leaves it only "
        "for a predicted saving that holds with its model's error added",
    )
    inject_faults: str | None = Field(
        None,
        description="inject faults into the rollout functions, e.g. 'errors=0.1,timeouts=0.05,stragglers=0.1,"
        "throttle=0.1,seed=1' (serverless.backends.faults.FaultSpec)",
    )

    def request(self) -> Any:
        """This job as a :class:`~optimizers.seraph.request.SeraphRequest`: the request's checks
        are the only checks of these fields (a failed one is a ``RequestError`` naming the field)."""
        from optimizers.seraph.request import SeraphRequest, parse_baseline_config, parse_faults

        fields = ("env_id", "target_reward", "objective", "weight", "deadline_s", "budget_usd", "backend",
                  "architecture", "seed", "max_steps", "replan_every", "retune")
        extra = {} if self.baseline_config is None else {"baseline_config": parse_baseline_config(self.baseline_config)}
        return SeraphRequest(**{f: getattr(self, f) for f in fields}, faults=parse_faults(self.inject_faults),
                             env_kwargs=dict(self.env_kwargs), backend_options=dict(self.backend_options), **extra)

    @field_validator("env_id")
    @classmethod
    def _known_env(cls, v: str) -> str:
        import gymnasium

        if ":" in v:  # the user's own module: importable, and registers the env
            from serverless.envs import check_env_id

            try:
                check_env_id(v)
            except UserError as exc:
                raise ValueError(str(exc)) from None
        elif v not in gymnasium.registry:
            close = [k for k in gymnasium.registry if v.split("-")[0].lower() in k.lower()][:5]
            raise ValueError(f"unknown Gymnasium environment {v!r}" + (f"; did you mean one of {close}?" if close else ""))
        return v


class DataSpec(_Strict):
    """Where the Criteo-format data comes from: an existing folder, or generated."""

    path: str | None = Field(None, description="an existing data folder; if unset, data is generated")
    rows: int = Field(50_000, ge=1_000, le=50_000_000, description="rows to generate when path is unset")
    seed: int = 0


class IngestSpec(_Strict):
    """The ingestion pipeline InTune tunes and the baselines it is compared with."""

    data: DataSpec = Field(default_factory=DataSpec)
    cpu_budget: int | None = Field(None, ge=1, description="threads the pipeline may use; default: this machine's cores")
    optimizer: str = Field("intune", description="the optimizer whose configuration is chosen")
    baselines: list[str] = Field(default_factory=lambda: ["autotune"], description="optimizers to compare against")
    time_budget_s: float = Field(30.0, gt=0, le=86_400, description="tuning time per optimizer")
    verify_window_s: float | None = Field(
        None, gt=0, le=600, description="seconds per measuring window when verifying live (default: the tuner's final protocol)"
    )
    verify_repeats: int | None = Field(
        None, ge=1, le=20, description="measuring windows when verifying live, median counts (default: final protocol)"
    )
    batch_size: int = Field(4096, ge=1, description="the trainer's batch size (fixed; the pipeline's output)")
    profile_window_s: float = Field(1.0, gt=0, le=60, description="measuring window of each profiling measurement (s)")
    seed: int = 0

    @field_validator("optimizer")
    @classmethod
    def _known_optimizer(cls, v: str) -> str:
        _check_optimizer_names([v])
        return v

    @field_validator("baselines")
    @classmethod
    def _known_baselines(cls, v: list[str]) -> list[str]:
        _check_optimizer_names(v)
        if len(set(v)) != len(v):
            raise ValueError(f"baselines are listed twice: {v}")
        return v


class CacheSpec(_Strict):
    """How long a profile may be reused before it is measured again."""

    profile_ttl_hours: float = Field(168.0, gt=0, description="profile cache expiry (hours)")


class WorkloadSpec(_Strict):
    """A workload file: an RL job, an ingestion pipeline, or both."""

    name: str = Field("workload", description="lowercase letters, digits and dashes; names the artifacts")
    rl: RLSpec | None = None
    ingestion: IngestSpec | None = None
    concurrency: Literal["auto", "parallel", "sequential"] = Field(
        "auto", description="run the two branches at once (parallel), one after the other, or decide by core count"
    )
    cache: CacheSpec = Field(default_factory=CacheSpec)

    @field_validator("name")
    @classmethod
    def _slug(cls, v: str) -> str:
        if not _SLUG.match(v):
            raise ValueError(f"name must be 1-40 lowercase letters, digits and dashes (an artifact key), got {v!r}")
        return v

    @model_validator(mode="after")
    def _something_to_do(self) -> "WorkloadSpec":
        if self.rl is None and self.ingestion is None:
            raise ValueError("a workload needs an 'rl' section, an 'ingestion' section, or both")
        return self


# -- loading --------------------------------------------------------------------------------------

def _check_optimizer_names(names: list[str]) -> None:
    from optimizers.ingestion_optimizers import INGESTION_OPTIMIZERS

    for name in names:
        if name not in INGESTION_OPTIMIZERS:
            raise ValueError(INGESTION_OPTIMIZERS.unknown(name))


def _describe(err: dict[str, Any], model: type[BaseModel]) -> str:
    loc = ".".join(field_name(p) for p in err["loc"]) or "(top level)"
    msg = err["msg"].removeprefix("Value error, ")
    if err["type"] == "extra_forbidden":
        msg = "unknown field"
        parent = _model_at(model, err["loc"][:-1])
        if parent is not None:
            msg += f"; allowed fields here: {sorted(parent.model_fields)}"
    elif err["type"] == "missing":
        msg = "field required"
    if "input" in err and err["type"] not in ("missing", "extra_forbidden") and not isinstance(err["input"], dict):
        if repr(err["input"]) not in msg:
            msg += f" (got {err['input']!r})"
    return f"{loc}: {msg}"


def _model_at(model: type[BaseModel], loc: tuple[Any, ...]) -> type[BaseModel] | None:
    """The nested model class at ``loc`` (for listing allowed fields)."""
    current: Any = model
    for part in loc:
        field = getattr(current, "model_fields", {}).get(part)
        if field is None:
            return None
        ann = field.annotation
        args = getattr(ann, "__args__", ()) or (ann,)
        current = next((a for a in args if isinstance(a, type) and issubclass(a, BaseModel)), None)
        if current is None:
            return None
    return current


#: The ``rl:`` field that sets a request field, where the names differ.
_RL_FIELD_OF_REQUEST = {"faults": "inject_faults"}


def parse_spec(data: Any, source: str = "workload") -> WorkloadSpec:
    """Validate already-parsed YAML/JSON; raise UserError naming every bad field."""
    if not isinstance(data, dict):
        raise UserError(f"{source}: a workload file must be a YAML mapping (name:, rl:, ingestion:), got {type(data).__name__}")
    try:
        spec = WorkloadSpec.model_validate(data)
    except ValidationError as exc:
        problems = [_describe(e, WorkloadSpec) for e in exc.errors()]
        raise UserError(f"{source}: invalid workload spec: " + "; ".join(problems)) from None
    if spec.rl is not None:
        from optimizers.seraph.request import RequestError

        try:  # Seraph's own checks, the same as the CLI's and Python's
            spec.rl.request()
        except RequestError as exc:
            name = _RL_FIELD_OF_REQUEST.get(exc.field, exc.field)
            raise UserError(f"{source}: invalid workload spec: " + str(exc.named(f"rl.{name}"))) from None
    return spec


def _one_line_yaml_error(exc: BaseException) -> str:
    """PyYAML's multi-line message as one line: the problem and where it is."""
    problem = getattr(exc, "problem", None) or " ".join(str(exc).split()) or type(exc).__name__
    mark = getattr(exc, "problem_mark", None)
    return f"{problem} (line {mark.line + 1}, column {mark.column + 1})" if mark is not None else str(problem)


def load_spec(path: str | Path, *, need: Literal["rl", "ingestion"] | None = None) -> WorkloadSpec:
    """Read and validate a workload YAML file.

    ``need`` names a section the caller cannot do without (the ``seraph`` flow
    needs ``rl``, the ``intune`` flow needs ``ingestion``).
    """
    p = Path(path)
    if not p.is_file():
        raise UserError(f"workload file {p} does not exist; try configs/demo.yaml")
    try:
        data = yaml.safe_load(p.read_text(encoding="utf-8"))
    except UnicodeDecodeError as exc:
        raise UserError(f"{p}: not UTF-8 text (byte {exc.start}); a workload file is YAML") from None
    except (yaml.YAMLError, ValueError, RecursionError) as exc:  # ValueError: e.g. a date like 2001-13-45
        raise UserError(f"{p}: not valid YAML: {_one_line_yaml_error(exc)}") from None
    spec = parse_spec(data, str(p))
    if need is not None and getattr(spec, need) is None:
        raise UserError(f"{p}: this flow needs a '{need}' section; the file has {[s for s in ('rl', 'ingestion') if getattr(spec, s)]}")
    return spec
