"""PNG plots for the run report (matplotlib, Agg backend; no Prefect here).

- :func:`reward_png`: mean episode return against time and against cost, one
  panel each, so a reader sees both what the reward cost in seconds and in dollars.
- :func:`throughput_png`: rows per second per ingestion optimizer, the figure the
  optimizer saw while tuning beside the one verified on the live pipeline.
The Pareto front comes from Seraph's own ``render_pareto_png``.

Where the Prefect UI's browser loads a plot from (``tasks.report.plot_url`` picks): with an
artifacts bucket configured (``TRAINWISE_ARTIFACTS_BUCKET``, the Terraform-made bucket)
the PNG is uploaded under ``plots/<run folder>/`` and the URL is a presigned GET, valid
for :data:`PRESIGNED_URL_TTL_S` (:func:`presigned_png_url`); without one, the URL is a
``data:`` URI holding the PNG itself (:func:`data_uri`), so the plot needs no server and
never expires.
"""

from __future__ import annotations

import base64
import os
from pathlib import Path
from typing import TYPE_CHECKING, Any, NotRequired, Sequence, TypedDict

from core.atomic import save_figure

if TYPE_CHECKING:  # pragma: no cover
    from serverless.run_state import CurvePoint

BUCKET_ENV = "TRAINWISE_ARTIFACTS_BUCKET"
PLOTS_PREFIX = "plots"
PRESIGNED_URL_TTL_S = 7 * 24 * 3600  # the longest a SigV4-presigned URL may live


def _pyplot() -> Any:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def reward_png(
    curve: Sequence[CurvePoint],
    path: Path,
    *,
    target: float | None = None,
    time_key: str = "wall_s",
    time_label: str = "wall-clock time (s, measured)",
    cost_label: str = "cost (USD)",
    title: str = "",
) -> Path:
    """Reward against time (left) and cost (right). ``curve`` rows hold
    ``mean_return``, ``time_key`` and ``cost_usd``; rows without a return are skipped."""
    plt = _pyplot()
    rows = [r for r in curve if r.get("mean_return") is not None]
    fig, (ax_t, ax_c) = plt.subplots(1, 2, figsize=(10, 4), dpi=110)
    for ax, key, label in ((ax_t, time_key, time_label), (ax_c, "cost_usd", cost_label)):
        ax.plot([r.get(key, 0.0) for r in rows], [r["mean_return"] for r in rows], "-o", ms=3)
        if target is not None:
            ax.axhline(target, color="tab:red", ls="--", lw=1, label=f"target {target:g}")
            ax.legend(loc="lower right", fontsize=8)
        ax.set_xlabel(label)
        ax.xaxis.set_major_locator(plt.MaxNLocator(5))  # USD figures are long: keep their ticks apart
        ax.set_ylabel("mean episode return")
        ax.grid(alpha=0.3)
    if title:
        fig.suptitle(title)
    fig.tight_layout()
    save_figure(fig, path)
    plt.close(fig)
    return path


class OptimizerRow(TypedDict):
    """What :func:`throughput_png` reads of one optimizer's row of the comparison table."""

    optimizer: str
    tuning_rows_per_s: float | None
    verified_rows_per_s: float | None
    tuning_label: NotRequired[str]  # simulated, measured or modelled


def throughput_png(rows: Sequence[OptimizerRow], path: Path, *, title: str = "") -> Path:
    """Grouped bars per optimizer: ``tuning_rows_per_s`` (labelled by ``tuning_label``)
    and ``verified_rows_per_s`` (measured on the live pipeline)."""
    plt = _pyplot()
    names = [r["optimizer"] for r in rows]
    x = range(len(names))
    width = 0.38
    fig, ax = plt.subplots(figsize=(max(5.0, 1.3 * len(names) + 2), 4), dpi=110)
    tuned = [r.get("tuning_rows_per_s") or 0.0 for r in rows]
    live = [r.get("verified_rows_per_s") or 0.0 for r in rows]
    labels = sorted({str(r.get("tuning_label", "")) for r in rows} - {""})
    ax.bar([i - width / 2 for i in x], tuned, width, label=f"while tuning ({', '.join(labels) or 'n/a'})", color="0.7")
    ax.bar([i + width / 2 for i in x], live, width, label="verified on the live pipeline (measured)", color="tab:blue")
    for i, v in zip(x, live):
        if v:
            ax.annotate(f"{v:,.0f}", (i + width / 2, v), ha="center", va="bottom", fontsize=7)
    ax.set_xticks(list(x))
    ax.set_xticklabels(names)
    ax.set_ylabel("rows per second")
    ax.legend(fontsize=8)
    ax.grid(axis="y", alpha=0.3)
    if title:
        ax.set_title(title)
    fig.tight_layout()
    save_figure(fig, path)
    plt.close(fig)
    return path


def plots_bucket() -> str | None:
    """The artifacts bucket plots go to, or ``None`` (the local default)."""
    return os.environ.get(BUCKET_ENV) or None


def plot_key(path: Path, run_dir: Path) -> str:
    """The object key of a run's plot: ``plots/<run folder>/<path in the run folder>``."""
    try:
        rel = path.resolve().relative_to(run_dir.resolve()).as_posix()
    except ValueError:  # a plot drawn outside the run folder keeps only its name
        rel = path.name
    return f"{PLOTS_PREFIX}/{run_dir.name}/{rel}"


def data_uri(path: Path) -> str:
    """The PNG as a ``data:`` URI (a browser shows it with no server behind it)."""
    return "data:image/png;base64," + base64.b64encode(path.read_bytes()).decode("ascii")


def _sigv4_client() -> Any:
    """An S3 client with the project's retries (``serverless.s3_payload.client_config``) that
    signs URLs with SigV4 (S3 refuses SigV2 for new buckets). Region from ``AWS_REGION`` or
    ``AWS_DEFAULT_REGION``, endpoint wherever boto3 reads it from (moto's server in tests)."""
    import boto3
    from botocore.config import Config

    from serverless.s3_payload import client_config

    region = os.environ.get("AWS_REGION") or os.environ.get("AWS_DEFAULT_REGION")
    config = client_config().merge(Config(signature_version="s3v4"))
    return boto3.session.Session().client("s3", region_name=region, config=config)


def presigned_png_url(path: Path, bucket: str, key: str, ttl_s: int = PRESIGNED_URL_TTL_S) -> str:
    """Upload the PNG to ``s3://bucket/key`` (as ``image/png``) and return a SigV4-presigned
    GET URL valid for ``ttl_s`` seconds."""
    client = _sigv4_client()
    client.put_object(Bucket=bucket, Key=key, Body=path.read_bytes(), ContentType="image/png")
    return str(client.generate_presigned_url("get_object", Params={"Bucket": bucket, "Key": key}, ExpiresIn=ttl_s))
