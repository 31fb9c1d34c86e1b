"""The run report: one markdown file per run (plus a Prefect markdown artifact),
its tables as Prefect table artifacts, and the result JSON.

A *section* is what one branch (Seraph or InTune) contributes: a title, markdown
(with image links relative to the run folder), the PNGs it drew, and the key
figures. :func:`render_report` joins the sections into ``report.md`` in the run
folder and into a markdown artifact, and publishes every PNG as an image artifact
(``<name>-<branch>-<plot>-plot``). In the artifacts an image's path becomes a URL the
UI's browser can load (:func:`plot_url`: a presigned S3 URL with an artifacts
bucket, a ``data:`` URI without), so the plots show inline in the UI.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any, Mapping, NotRequired, Sequence, TypedDict

from prefect import get_run_logger, task
from prefect.artifacts import create_image_artifact, create_markdown_artifact, create_table_artifact

from core.atomic import write_text
from core.json_edge import JsonObject
from core.results import write_json
from tasks.plots import data_uri, plot_key, plots_bucket, presigned_png_url


def fmt(value: Any, digits: int = 4) -> str:
    """A number as a short readable string (None as a dash)."""
    if value is None:
        return "-"
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, float):
        if value == 0:
            return "0"
        if abs(value) >= 1000:
            return f"{value:,.0f}"
        return f"{value:.{digits}g}"
    return str(value)


def md_table(rows: Sequence[Mapping[str, Any]], columns: Sequence[str] | None = None) -> str:
    """A GitHub-flavoured markdown table of ``rows`` (dicts)."""
    if not rows:
        return "_(none)_\n"
    cols = list(columns or rows[0].keys())
    head = "| " + " | ".join(cols) + " |\n|" + "|".join("---" for _ in cols) + "|\n"
    body = "".join("| " + " | ".join(fmt(r.get(c)).replace("|", "\\|") for c in cols) + " |\n" for r in rows)
    return head + body


def table_artifact(key: str, rows: Sequence[Mapping[str, Any]], description: str) -> None:
    """A Prefect table artifact; values are stringified so every cell shows."""
    clean = [{k: fmt(v) for k, v in r.items()} for r in rows]
    create_table_artifact(table=clean, key=key, description=description)


class ReportSection(TypedDict):
    """One branch's part of the report (:func:`section`): its markdown, its plots and a summary
    for ``result.json``; JSON-able."""

    kind: str
    title: str
    markdown: str
    plots: list[str]
    summary: JsonObject
    profile_cached: bool | None


class BranchResult(TypedDict):
    """What a branch flow (``seraph``, ``intune``) hands up to ``optimize``: its section and folder."""

    section: ReportSection
    run_dir: str


class RunExtras(TypedDict, total=False):
    """What a flow adds to its result: its name, and ``optimize``'s branches or ``intunex``'s plan."""

    flow: str
    branches: list[str]  # optimize's: the branches it ran
    parallel: bool  # whether they ran concurrently, and why (or why not)
    concurrency_reason: str
    failed_branches: dict[str, str]  # a failed branch's one-line reason
    plan: JsonObject  # intunex's plan result, without the baselines' assignments


class RunResult(RunExtras):
    """A run's ``result.json`` (:func:`render_report`), which the flow also returns: where its
    report, plots and results are, whether its profiles were reused, each branch's summary."""

    workload: str
    config: str
    run_dir: str
    report: str
    plots: list[str]
    profile_cache: dict[str, bool]
    sections: dict[str, JsonObject]  # each branch's summary (ReportSection.summary), by kind


def section(
    kind: str,
    title: str,
    markdown: str,
    *,
    plots: Sequence[Path] = (),
    summary: Mapping[str, Any] | None = None,
    profile_cached: bool | None = None,
) -> ReportSection:
    """What a branch hands to :func:`render_report` (JSON-able)."""
    return {
        "kind": kind,
        "title": title,
        "markdown": markdown,
        "plots": [str(p) for p in plots],
        "summary": dict(summary or {}),
        "profile_cached": profile_cached,
    }


_IMAGE = re.compile(r"!\[([^\]]*)\]\(([^)]+)\)")


def plot_url(path: Path, run_dir: Path) -> str:
    """A URL the Prefect UI's browser loads the PNG from: presigned from the artifacts bucket
    when one is configured, else a ``data:`` URI. An upload that fails (no credentials,
    access denied, no network) is logged and the plot is embedded instead: the run's
    results are already on disk, and a report without its plots helps nobody."""
    bucket = plots_bucket()
    if bucket is None:
        return data_uri(path)
    from botocore.exceptions import BotoCoreError, ClientError

    key = plot_key(path, run_dir)
    try:
        return presigned_png_url(path, bucket, key)
    except (BotoCoreError, ClientError) as exc:
        get_run_logger().warning("could not upload %s to s3://%s/%s (%s); embedding it in the artifact instead",
                                 path.name, bucket, key, " ".join(str(exc).split())[:300])
        return data_uri(path)


def _for_artifact(markdown: str, run_dir: Path, urls: Mapping[Path, str]) -> str:
    """Images -> the URLs in ``urls`` (by resolved path); an image without one becomes its
    name and path as text (a relative path is a dead link in the UI)."""

    def image(m: re.Match[str]) -> str:
        url = urls.get((run_dir / m.group(2)).resolve())
        return f"![{m.group(1)}]({url})" if url else f"_{m.group(1) or 'plot'} (`{m.group(2)}`, not drawn)_"

    return _IMAGE.sub(image, markdown)


def _artifact_key(text: str) -> str:
    """``text`` as a Prefect artifact key: lowercase letters, digits and dashes."""
    return re.sub(r"[^a-z0-9]+", "-", text.lower()).strip("-")


def publish_plots(name: str, title: str, run_dir: Path, sections: Sequence[ReportSection]) -> dict[Path, str]:
    """One image artifact per PNG of the sections, ``<name>-<kind>-<plot>-plot``; returns the
    URL of each plot by its resolved path."""
    urls: dict[Path, str] = {}
    for s in sections:
        for plot in map(Path, s["plots"]):
            url = urls[plot.resolve()] = plot_url(plot, run_dir)
            create_image_artifact(image_url=url, key=_artifact_key(f"{name}-{s['kind']}-{plot.stem}-plot"),
                                  description=f"{title}: {s['title']}, `{plot.name}`")
    return urls


@task(name="render-report")
def render_report(
    name: str,
    title: str,
    run_dir: str,
    sections: list[ReportSection],
    *,
    config: str,
    extra: RunExtras | None = None,
) -> RunResult:
    """Write ``report.md`` and ``result.json`` into the run folder, publish the plots as
    image artifacts and the report, plots inline, as the ``<name>-report`` markdown
    artifact. Returns the result dict."""
    out = Path(run_dir)
    cache = {s["kind"]: s["profile_cached"] for s in sections if s.get("profile_cached") is not None}
    cache_line = ", ".join(f"{k}: {'cached (reused)' if v else 'measured (not cached)'}" for k, v in sorted(cache.items()))
    parts = [
        f"# {title}\n",
        f"Workload file: `{config}`  \nResults folder: `{out}`  \n" + (f"Profiles: {cache_line}\n" if cache_line else ""),
    ]
    for s in sections:
        parts.append(f"\n## {s['title']}\n\n{s['markdown'].strip()}\n")
    markdown = "\n".join(parts)
    report = out / "report.md"
    write_text(report, markdown)
    plots = [p for s in sections for p in s["plots"]]
    result: RunResult = {
        "workload": name,
        "config": config,
        "run_dir": str(out),
        "report": str(report),
        "plots": plots,
        "profile_cache": cache,
        "sections": {s["kind"]: s["summary"] for s in sections},
        **(extra or RunExtras()),
    }
    write_json(out / "result.json", result)
    urls = publish_plots(name, title, out, sections)
    create_markdown_artifact(markdown=_for_artifact(markdown, out, urls), key=f"{name}-report", description=title)
    return result
