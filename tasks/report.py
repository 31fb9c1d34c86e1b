"""The run report: one markdown file per run (plus a Prefect markdown artifact),
its tables as Prefect table artifacts, and the result JSON.

A *section* is what one branch (Seraph or InTune) contributes: a title, markdown
(with image links relative to the run folder), the PNGs it drew, and the key
figures. :func:`render_report` joins the sections into ``report.md`` in the run
folder and into a markdown artifact; in the artifact the images become ``file://``
links, since the Prefect UI cannot show files from the local disk.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any, Mapping, Sequence

from prefect import task
from prefect.artifacts import create_markdown_artifact, create_table_artifact

from core.results import write_json


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


def section(
    kind: str,
    title: str,
    markdown: str,
    *,
    plots: Sequence[Path] = (),
    summary: Mapping[str, Any] | None = None,
    profile_cached: bool | None = None,
) -> dict[str, Any]:
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


def _for_artifact(markdown: str, run_dir: Path) -> str:
    """Images -> file:// links (the UI cannot display local files)."""
    return _IMAGE.sub(lambda m: f"[{m.group(1) or m.group(2)}]({(run_dir / m.group(2)).resolve().as_uri()})", markdown)


@task(name="render-report")
def render_report(
    name: str,
    title: str,
    run_dir: str,
    sections: list[dict[str, Any]],
    *,
    config: str,
    extra: Mapping[str, Any] | None = None,
) -> dict[str, Any]:
    """Write ``report.md`` and ``result.json`` into the run folder and publish the
    report as the ``<name>-report`` markdown artifact. Returns the result dict."""
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
    report.write_text(markdown)
    plots = [p for s in sections for p in s["plots"]]
    result = {
        "workload": name,
        "config": config,
        "run_dir": str(out),
        "report": str(report),
        "plots": plots,
        "profile_cache": cache,
        "sections": {s["kind"]: s["summary"] for s in sections},
        **dict(extra or {}),
    }
    write_json(out / "result.json", result)
    create_markdown_artifact(markdown=_for_artifact(markdown, out), key=f"{name}-report", description=title)
    return result
