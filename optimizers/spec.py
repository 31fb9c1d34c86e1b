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
from pydantic_core import ErrorDetails

from core.errors import UserError, field_name
from core.request_model import check_with, problem_of
from optimizers.ingest_request import DataSpec, IngestRequest, known_optimizer
from optimizers.seraph.request import SeraphRequest

__all__ = ["CacheSpec", "DataSpec", "IngestSpec", "RLSpec", "WorkloadSpec", "load_spec", "parse_spec"]

_SLUG = re.compile(r"^[a-z0-9][a-z0-9-]{0,39}$")


class _Strict(BaseModel):
    """Unknown keys are errors; values are validated on assignment too; NaN and infinity are
    not numbers a workload can mean (``.nan`` or ``.inf`` in YAML)."""

    model_config = ConfigDict(extra="forbid", validate_assignment=True, allow_inf_nan=False)


class RLSpec(SeraphRequest):
    """The ``rl:`` section: the RL job Seraph tunes, which is a
    :class:`~optimizers.seraph.request.SeraphRequest` (its fields, defaults, YAML keys and
    checks; its errors read ``rl.<key>``), plus the fixed configurations the flow also
    trains for comparison."""

    model_config = ConfigDict(title="RLSpec")

    baselines: list[Literal["static"]] = Field(
        default_factory=list,
        description="fixed configurations also trained to the target, for comparison "
        "(static: RLlib's PPO defaults mapped to functions, 2 actors x 1,769 MB, batch 4,000)",
    )

    seeds: str | None = Field(
        None,
        description="train the job once per seed, as `rl sweep` does ('0-9', '0,1,2' or '0-3,7'): each seed's "
        "configuration chosen from the job's run history; unset: one run at `seed`",
    )

    @field_validator("seeds")
    @classmethod
    def _seed_list(cls, v: str | None) -> str | None:
        if v is not None:
            from optimizers.seraph.seeds import parse_seeds

            check_with(parse_seeds, v, named="--seeds")
        return v

    def seed_list(self) -> tuple[int, ...] | None:
        """The seeds of a sweep, or None for one run."""
        from optimizers.seraph.seeds import parse_seeds

        return None if self.seeds is None else parse_seeds(self.seeds)

    def request(self) -> SeraphRequest:
        """This job's request (every field of it, checked already)."""
        return SeraphRequest.model_construct(**{name: getattr(self, name) for name in SeraphRequest.model_fields})


class IngestSpec(IngestRequest):
    """The ``ingestion:`` section: the pipeline InTune tunes, which is an
    :class:`~optimizers.ingest_request.IngestRequest` (its fields, defaults, YAML keys and
    checks; its errors read ``ingestion.<key>``), plus what only the flow does: the optimizers
    it compares the chosen one with, and the windows of its profiling and live verification."""

    model_config = ConfigDict(title="IngestSpec")

    baselines: list[str] = Field(default_factory=lambda: ["autotune"], description="optimizers to compare against")
    verify_window_s: float | None = Field(
        None, gt=0, le=600, description="seconds per measuring window when verifying live (default: the tuner's final protocol)"
    )
    verify_repeats: int | None = Field(
        None, ge=1, le=20, description="measuring windows when verifying live, median counts (default: final protocol)"
    )
    profile_window_s: float = Field(1.0, gt=0, le=60, description="measuring window of each profiling measurement (s)")

    @field_validator("baselines")
    @classmethod
    def _known_baselines(cls, v: list[str]) -> list[str]:
        for name in v:
            known_optimizer(name)
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

def _describe(err: ErrorDetails, model: type[BaseModel]) -> str:
    loc = ".".join(field_name(p) for p in err["loc"]) or "(top level)"
    parent = _model_at(model, err["loc"][:-1]) if err["type"] == "extra_forbidden" else None
    allowed = None if parent is None else sorted(f.alias or name for name, f in parent.model_fields.items())
    return f"{loc}: {problem_of(err, allowed)}"


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


def parse_spec(data: Any, source: str = "workload") -> WorkloadSpec:
    """Validate already-parsed YAML/JSON; raise UserError naming every bad field."""
    if not isinstance(data, dict):
        raise UserError(f"{source}: a workload file must be a YAML mapping (name:, rl:, ingestion:), got {type(data).__name__}")
    try:
        spec = WorkloadSpec.model_validate(data)
    except ValidationError as exc:
        problems = [_describe(e, WorkloadSpec) for e in exc.errors()]
        raise UserError(f"{source}: invalid workload spec: " + "; ".join(problems)) from None
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
