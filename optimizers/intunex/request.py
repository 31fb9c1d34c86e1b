"""What a user asks InTuneX for: one frozen request model, the one definition of its fields.

:class:`ClusterRequest` is "plan the ingestion pool for the training jobs of this jobs file,
over these instance types, for this objective within this budget, beside these baselines":
each field's type, default, description and check is written here. ``trainwise ingest
cluster``'s request flags and their help are generated from it (``trainwise.cli.model_flags``)
and the ``intunex`` flow takes it as its one typed parameter (``request``: the Prefect UI's
run form is this model's form).

What is not the request stays with its front end: how the plan is run (``--simulate``,
``--local-nodes``, ``--workers`` and their measuring options, ``--what-if``) and where it is
written (``--write-tfvars``, ``--json-out``) are the command's own flags; the cached cluster
profile's freshness is the flow's own parameters.

The one table where the front ends differ is :data:`FLAG_DEFAULTS`: the flow plans the
repository's example jobs file by default, while the command line names its jobs file (or
draws a synthetic cluster with ``--what-if``, which needs none).

A failed check raises :class:`~core.request_model.RequestError`, which names the field
(``budget_usd_per_h``); the command line re-labels it as its flag (``--budget-usd-per-h``).

Nothing here imports numpy: the CLI builds its help from this module.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar, Literal

from pydantic import ConfigDict, Field, field_validator

from core.request_model import FlagDefault, RequestError, RequestModel, check_with
from optimizers.intunex.names import BASELINES, LIVE_BASELINES, OBJECTIVES

if TYPE_CHECKING:
    from ingestion.cluster.instances import InstanceType
    from ingestion.cluster.jobs import JobsFile

__all__ = ["FLAG_DEFAULTS", "Baseline", "ClusterRequest", "Objective", "RequestError"]

#: What the plan maximises (a drop-down in the flow's run form, the flag's choices).
Objective = Literal[OBJECTIVES]  # type: ignore[valid-type]
#: A planner compared with InTuneX on the same cluster.
Baseline = Literal[BASELINES]  # type: ignore[valid-type]

#: The command line's own defaults, where they differ from the model's (the flow's).
FLAG_DEFAULTS: dict[str, FlagDefault] = {"jobs": None}


def _names(value: Any) -> Any:
    """A comma-separated text as its names (what a flag gives); a list passes as it is."""
    if isinstance(value, str):
        return tuple(n.strip() for n in value.split(",") if n.strip())
    return value


class ClusterRequest(RequestModel):
    """Plan nodes and per-node configurations for the jobs of ``jobs`` (InTuneX)."""

    model_config = ConfigDict(title="ClusterRequest")
    what: ClassVar[str] = "cluster request"
    flag_defaults: ClassVar[dict[str, FlagDefault]] = FLAG_DEFAULTS

    jobs: str | None = Field("configs/cluster-demo.yaml", description=(
        "the jobs file (YAML): the training jobs sharing the pool, and the pool, relative to the working directory "
        "(the command line: required unless --what-if draws a synthetic cluster)"))
    instance_types: tuple[str, ...] | None = Field(None, description=(
        "instance types or shell-style patterns, comma-separated, e.g. 'c7g.*,c7i.2xlarge' (default: the jobs file's, "
        "else a mixed set of c7i, c7g, m7i and r7i)"))
    objective: Objective = Field("throughput-per-usd", description=(
        "what the plan maximises: rows per dollar, the least cost that feeds every job, or the most rows/s within "
        "the budget"))
    budget_usd_per_h: float | None = Field(None, gt=0, description=(
        "most dollars per hour the pool may cost (default: the jobs file's budget_usd_per_h, else none)"))
    baselines: tuple[Baseline, ...] | None = Field(None, description=(
        f"the baselines planned beside InTuneX, comma-separated, of {', '.join(BASELINES)}, or none (default: all on "
        f"the cluster model; {' and '.join(LIVE_BASELINES)} live)"))
    static_type: str | None = Field(None, description=(
        "the instance type of the static and Cachew-style baselines (default: c7i.4xlarge if in the pool, else the "
        "type nearest 16 vCPUs)"))
    seed: int = Field(0, ge=0, lt=2**32, description="the planning seed")

    @field_validator("jobs")
    @classmethod
    def _a_file_name(cls, v: str | None) -> str | None:
        if v is not None and not v.strip():
            raise ValueError("must name a jobs file (YAML), got an empty path")
        return v

    @field_validator("instance_types", mode="before")
    @classmethod
    def _patterns(cls, v: Any) -> Any:
        v = _names(v)
        if v is not None and not v:
            raise ValueError("names no instance type; give types or patterns, e.g. 'c7g.*,c7i.2xlarge'")
        return v

    @field_validator("instance_types")
    @classmethod
    def _known_types(cls, v: tuple[str, ...] | None) -> tuple[str, ...] | None:
        if v is not None:
            from ingestion.cluster.instances import select

            check_with(select, v, named="--instance-types")
        return v

    @field_validator("baselines", mode="before")
    @classmethod
    def _baseline_names(cls, v: Any) -> Any:
        names = _names(v)
        if names is None or not isinstance(names, (list, tuple)):
            return names
        names = tuple(n for n in names if n != "none")
        unknown = [n for n in names if n not in BASELINES]
        if unknown:
            raise ValueError(f"unknown {unknown}; allowed: {', '.join(BASELINES)} or none")
        return names

    @field_validator("static_type")
    @classmethod
    def _one_type(cls, v: str | None) -> str | None:
        if v is not None:
            from ingestion.cluster.instances import by_name

            check_with(by_name, v)
        return v

    # -- what the request implies ------------------------------------------------------------
    def jobs_file(self) -> Path:
        """The jobs file's path; a request without one (a synthetic what-if's) is an error here."""
        if self.jobs is None:
            raise RequestError("jobs", "a jobs file is required (or --simulate --what-if nodes=N,jobs=J)")
        return Path(self.jobs)

    def load_jobs(self) -> "JobsFile":
        """The jobs file, read and validated (a missing or malformed file is a UserError naming it)."""
        from ingestion.cluster.jobs import load_jobs

        return load_jobs(self.jobs_file())

    def type_patterns(self, spec: "JobsFile") -> list[str] | None:
        """The instance types or patterns planned over: the request's, else the jobs file's (None: the defaults)."""
        return list(self.instance_types) if self.instance_types is not None else spec.pool.instance_types

    def types(self, spec: "JobsFile") -> list["InstanceType"]:
        """The instance types planned over (:meth:`type_patterns`, resolved in the price table)."""
        from ingestion.cluster.instances import select

        return select(self.type_patterns(spec))

    def baselines_for(self, live: bool) -> tuple[str, ...]:
        """The baselines planned beside InTuneX: the request's, else all on the cluster model and
        the live ones in a live run."""
        if self.baselines is not None:
            return self.baselines
        return LIVE_BASELINES if live else BASELINES
