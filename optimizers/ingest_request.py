"""What a user asks the ingestion tuner for: one frozen request model, the one definition of its fields.

:class:`IngestRequest` is "tune the tf.data pipeline over this data, on this node, with this
optimizer, within this budget": each field's type, default, description and check is written
here. ``trainwise ingest tune``'s flags and help are generated from it
(``trainwise.cli.model_flags``), a workload file's ``ingestion:`` section is validated by it
(``optimizers.spec.IngestSpec`` adds what only the flow does: the baselines it compares and
its verification and profiling windows), and the flows take it as their typed parameter.

The front ends differ in two tables, both here: :data:`RENAMES` (the node's ``vcpus`` is
``cpu_budget`` in a workload file) and :data:`FLAG_DEFAULTS` (one run at the terminal tunes
for 180 s by default and must name its data folder and its optimizer; a workload's run, which
also tunes each baseline, takes 30 s each and generates data when it names none).

A failed check raises :class:`~core.request_model.RequestError`, which names the field
(``time_budget_s``); each front end re-labels it as its user wrote it (``--time-budget-s`` on
the command line, ``ingestion.time_budget_s`` in a workload file).

Nothing here imports numpy or TensorFlow: the CLI builds its help from this module.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Callable, ClassVar, Literal, Sequence

from pydantic import BaseModel, ConfigDict, Field, field_validator

from core.request_model import REQUIRED, FlagDefault, Rename, Renames, RequestError, RequestModel
from optimizers.ingestion_optimizers import INGESTION_OPTIMIZERS, IngestJob

if TYPE_CHECKING:
    from ingestion.node import Node
    from ingestion.pipeline import PipelineSpec

__all__ = ["FLAG_DEFAULTS", "RENAMES", "DataSpec", "Format", "IngestRequest", "RequestError", "known_optimizer"]

#: The shard formats a pipeline reads (``ingestion.datagen.FORMATS``, which a test holds equal).
Format = Literal["tsv", "tfrecord"]

#: Where a front end names a request field otherwise than the model does (the one table).
RENAMES = Renames(vcpus=Rename(key="cpu_budget"))

#: The command line's own defaults, where they differ from the model's (the file's and the flows').
FLAG_DEFAULTS: dict[str, FlagDefault] = {"data": REQUIRED, "optimizer": REQUIRED, "time_budget_s": 180.0}


def known_optimizer(name: str) -> str:
    """A name the ingestion-optimizer registry knows, else its error (with the closest names)."""
    if name not in INGESTION_OPTIMIZERS:
        raise ValueError(INGESTION_OPTIMIZERS.unknown(name))
    return name


class DataSpec(BaseModel):
    """Where the Criteo-format data comes from: an existing folder, or generated."""

    model_config = ConfigDict(frozen=True, extra="forbid", allow_inf_nan=False)

    path: str | None = Field(None, description="an existing data folder; if unset, data is generated")
    rows: int = Field(50_000, ge=1_000, le=50_000_000, description="rows to generate when path is unset")
    seed: int = Field(0, description="the generator's seed (the same rows and seed give the same bytes)")


class IngestRequest(RequestModel):
    """Tune the ingestion pipeline over ``data`` on the node with ``optimizer`` in ``time_budget_s``."""

    model_config = ConfigDict(alias_generator=RENAMES.key, title="IngestRequest")
    renames: ClassVar[Renames] = RENAMES
    what: ClassVar[str] = "ingestion request"
    flag_defaults: ClassVar[dict[str, FlagDefault]] = FLAG_DEFAULTS
    #: The fields a registry names the values of, read when asked (a registration made after import counts).
    choices: ClassVar[dict[str, Callable[[], tuple[str, ...]]]] = {"optimizer": INGESTION_OPTIMIZERS.names}

    data: DataSpec = Field(default_factory=DataSpec, description=(
        "the folder of Criteo-format shards (`ingest gen-data` writes one); a workload may instead name rows to "
        "generate, {rows: N, seed: S}"))
    format: Format | None = Field(None, description="the shards' format (default: detected from the folder's files; "
                                  "generated data: tsv)")
    optimizer: str = Field("intune", description="the ingestion optimizer whose configuration is chosen")
    time_budget_s: float = Field(30.0, gt=0, le=86_400, description="the tuning time budget in seconds (per optimizer "
                                 "in a workload's run)")
    max_trials: int | None = Field(None, ge=1, description="stop after this many measured trials")
    batch_size: int = Field(4096, ge=1, description="the trainer's batch size (fixed: the pipeline's output)")
    seed: int = Field(0, ge=0, lt=2**32, description="the tuning seed")
    vcpus: int | None = Field(None, ge=1, description="the node's vCPUs the pipeline may use (default: this machine's)")
    ram_gib: float | None = Field(None, gt=0, description="the node's RAM in GiB (default: this machine's)")
    hourly_usd: float = Field(0.0, ge=0, description="the node's hourly price (for reports)")
    on_bad_row: Literal["error", "skip"] = Field("error", description=(
        "a malformed TSV row: stop with an error naming it, or skip it (skipped rows are counted)"))

    @field_validator("data", mode="before")
    @classmethod
    def _a_folder(cls, v: Any) -> Any:
        """A folder's path stands for ``{path: folder}`` (what ``--data DIR`` gives)."""
        if isinstance(v, str):
            if not v.strip():
                raise ValueError("must name a folder of shards, got an empty path")
            return {"path": v}
        return v

    @field_validator("optimizer")
    @classmethod
    def _registered(cls, v: str) -> str:
        return known_optimizer(v)

    # -- what the request implies ------------------------------------------------------------
    def node(self) -> "Node":
        """The node tuned for: this machine, with the request's vCPUs and RAM where it sets them
        (then named ``custom``), priced at ``hourly_usd``. The one place the node is decided."""
        from ingestion.node import Node, this_machine

        here = this_machine(self.hourly_usd)
        if self.vcpus is None and self.ram_gib is None:
            return here
        return Node(name="custom", vcpus=here.vcpus if self.vcpus is None else self.vcpus,
                    ram_gib=here.ram_gib if self.ram_gib is None else self.ram_gib, hourly_usd=self.hourly_usd)

    def pipeline(self, folder: str, fmt: str, shards: Sequence[str], node: "Node") -> "PipelineSpec":
        """The DLRM pipeline over ``shards`` (of ``folder``, in ``fmt``, as listed once) on ``node``,
        at the request's batch size and bad-row policy."""
        from ingestion.dlrm import dlrm_spec

        return dlrm_spec(folder, fmt, node, (self.batch_size,), self.on_bad_row, shards=shards)

    def job(self, folder: str, fmt: str, shards: Sequence[str], **fields: Any) -> IngestJob:
        """The tuning job over ``shards`` (of ``folder``, in ``fmt``, as listed once): the node
        (:meth:`node`), the pipeline on it (:meth:`pipeline`), the request's budget (starting
        now), seed and trial cap, with the caller's own ``fields`` (a calibration, the final
        protocol). The job carries its pipeline and node (``job.spec``, ``job.node``)."""
        node = self.node()
        return IngestJob.create(self.pipeline(folder, fmt, shards, node), node, time_budget_s=self.time_budget_s,
                                seed=self.seed, max_trials=self.max_trials, **fields)
