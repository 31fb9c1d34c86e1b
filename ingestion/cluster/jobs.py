"""The jobs file: the training jobs that share one ingestion pool, and the pool itself.

Example (``configs/cluster-demo.yaml``)::

    pool: {max_nodes: 16}
    jobs:
      - name: ctr-small
        demand_rows_per_s: 400000     # rows/s the job's accelerators consume, or `measure` (see trainer:)
        pipeline: parse-bound         # read-bound | parse-bound | transform-bound | profile | dlrm-tsv | dlrm-tfrecord
        seed: 1

A job is *fed* when its ingestion delivers its demand. ``pipeline`` names a synthetic DLRM-like
pipeline of the single-node simulator (its costs drawn from ``seed``), ``profile`` with
``profile: FILE``, a calibration of the real DLRM pipeline (``ingestion.calibrate``'s JSON), or a
real pipeline that live runs can start (``dlrm-tsv``, ``dlrm-tfrecord``: ``ingestion.cluster.pipelines``).
Validation names the field and what is allowed, in one line per mistake.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Literal

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator
from pydantic_core import ErrorDetails

from core.errors import UserError

PIPELINES = ("read-bound", "parse-bound", "transform-bound", "profile", "dlrm-tsv", "dlrm-tfrecord")


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid")


class Job(_Strict):
    name: str = Field(min_length=1, max_length=40, pattern=r"^[A-Za-z0-9][A-Za-z0-9_.-]*$")
    demand_rows_per_s: float | Literal["measure"] = Field(
        description="rows/s the job's trainers consume, or 'measure' (run its trainer: ingestion.cluster.trainer)")
    trainer: str = Field("dlrm", min_length=1, description="with demand 'measure': dlrm or module:function")
    pipeline: Literal["read-bound", "parse-bound", "transform-bound", "profile", "dlrm-tsv", "dlrm-tfrecord"] = "parse-bound"
    seed: int = Field(0, ge=0, description="draws the synthetic pipeline's stage costs")
    profile: str | None = Field(None, description="a calibration JSON of the real pipeline (pipeline: profile)")
    wire_bytes_per_row: float = Field(320.0, gt=0, description="bytes per row sent from a worker to the trainer")

    @field_validator("demand_rows_per_s", mode="before")
    @classmethod
    def _demand(cls, value: Any) -> Any:
        if value == "measure":
            return value
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            raise ValueError("must be a number of rows/s or 'measure'")
        if not value > 0:
            raise ValueError("must be > 0")
        return float(value)

    @model_validator(mode="after")
    def _profile_given(self) -> "Job":
        if self.pipeline == "profile" and not self.profile:
            raise ValueError("pipeline 'profile' needs profile: FILE (a calibration JSON)")
        return self


class Pool(_Strict):
    max_nodes: int = Field(16, ge=1, le=10_000, description="most nodes the pool may hold")
    instance_types: list[str] | None = Field(None, description="patterns such as 'c7g.*' (default: a mixed set)")


class JobsFile(_Strict):
    pool: Pool = Field(default_factory=Pool)
    budget_usd_per_h: float | None = Field(None, gt=0)
    jobs: list[Job] = Field(min_length=1)

    @model_validator(mode="after")
    def _unique_names(self) -> "JobsFile":
        names = [j.name for j in self.jobs]
        dup = sorted({n for n in names if names.count(n) > 1})
        if dup:
            raise ValueError(f"job names must be unique; repeated: {dup}")
        return self


_MESSAGES = {"greater_than": "must be > {gt}", "greater_than_equal": "must be >= {ge}",
             "less_than_equal": "must be <= {le}", "missing": "is required", "extra_forbidden": "is not a known field"}


def _where(loc: tuple[Any, ...]) -> str:
    out = ""
    for part in loc:
        out += f"[{part}]" if isinstance(part, int) else (f".{part}" if out else str(part))
    return out or "(file)"


def describe(error: ErrorDetails) -> str:
    """One pydantic error as ``jobs[0].demand_rows_per_s: must be > 0, got -5``."""
    ctx = error.get("ctx") or {}
    template = _MESSAGES.get(error["type"])
    shown = {k: (f"{v:g}" if isinstance(v, (int, float)) else v) for k, v in ctx.items()}
    message = template.format(**shown) if template else str(error["msg"]).removeprefix("Value error, ")
    if error["type"] == "literal_error":
        message = f"must be one of {', '.join(PIPELINES)}"
    got = "" if error["type"] in ("missing",) else f", got {error.get('input')!r}"
    return f"{_where(tuple(error['loc']))}: {message}{got}"


def parse_jobs(data: Any, source: str = "jobs file") -> JobsFile:
    if not isinstance(data, dict):
        raise UserError(f"{source}: must be a YAML mapping with a 'jobs:' list, got {type(data).__name__}")
    try:
        return JobsFile.model_validate(data)
    except ValidationError as exc:
        raise UserError(f"{source}: " + "; ".join(describe(e) for e in exc.errors())) from None


def load_jobs(path: str | Path) -> JobsFile:
    """Read and validate a jobs file; a missing or malformed file is a :class:`UserError`."""
    p = Path(path)
    if not p.is_file():
        raise UserError(f"--jobs {p}: no such file; see configs/cluster-demo.yaml for an example")
    try:
        data = yaml.safe_load(p.read_text())
    except yaml.YAMLError as exc:
        raise UserError(f"--jobs {p}: not valid YAML ({str(exc).splitlines()[0]})") from None
    jobs = parse_jobs(data, str(p))
    for i, job in enumerate(jobs.jobs):
        if job.profile and not (p.parent / job.profile).is_file() and not Path(job.profile).is_file():
            raise UserError(f"{p}: jobs[{i}].profile: no such file {job.profile!r}")
    return jobs
