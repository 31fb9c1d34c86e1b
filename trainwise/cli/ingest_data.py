"""The data folder an ``ingest`` command reads (``tune``, ``bench``): its malformed rows, found
before TensorFlow is imported (the shards are listed once, by ``ingestion.dlrm.list_shards``)."""

from __future__ import annotations

import sys
from pathlib import Path

from core.errors import UserError
from core.json_edge import JsonObject


def check_bad_rows(data: Path, fmt: str, shards: list[str], policy: str) -> JsonObject:
    """Scan TSV shards for malformed rows first: error names the first one, skip counts them."""
    from ingestion.dlrm import count_bad_rows

    report = count_bad_rows(data, fmt, shards)
    corrupt = report.get("corrupt_files") or []
    if corrupt:  # a damaged TFRecord shard cannot be read past its bad record: never skipped silently
        raise UserError(
            f"{len(corrupt)} corrupt TFRecord shard(s) in {data}, first {corrupt[0]['file']} at record "
            f"{corrupt[0]['record']} ({corrupt[0]['error'].splitlines()[0]}); regenerate or remove it"
        )
    if report["bad_rows"] and policy == "error":
        raise UserError(
            f"{report['bad_rows']} malformed row(s) in {data}, first at {report['first_bad']}; "
            f"fix the data or pass --on-bad-row skip to skip (and count) them"
        )
    if report["bad_rows"]:
        print(f"skipping {report['bad_rows']} malformed row(s) of {report['rows']} (first at {report['first_bad']})",
              file=sys.stderr)
    return report
