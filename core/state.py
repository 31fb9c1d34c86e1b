"""Where trainwise's reusable state lives: the local disk, or an S3 prefix shared by machines.

``TRAINWISE_STATE`` chooses:

- unset, empty or ``local`` (the default): everything stays under ``TRAINWISE_HOME``
  (:mod:`core.paths`);
- ``s3://BUCKET[/PREFIX]``: the caches worth sharing also live in that bucket, so a second
  machine or a worker in a work pool starts warm. Usually the artifacts bucket Terraform makes
  (``terraform output artifacts_bucket``), e.g. ``s3://<bucket>/trainwise-state``.

What is shared: ``profiles/`` (Seraph's profiles, InTune's pipeline calibrations) and
``agents/`` (InTune's fine-tuned agents), mirrored file by file at
``<PREFIX>/<kind>/<file name>``; Prefect's cached task results go to
``<PREFIX>/prefect-results`` through prefect-aws's ``S3Bucket`` (``tasks.caching``). What stays
local: ``data/`` (generated from its seed; the same rows on every machine) and
``checkpoints/`` (one run's resume point).

Each cached file keeps its local path: :func:`pull` fetches a file missing locally from the
bucket before it is read, and :func:`push` uploads it after it is written. A profile's key still
holds the hardware fingerprint, so a machine of another kind profiles afresh instead of reusing
figures measured elsewhere. The S3 client is boto3's (endpoint and credentials from the usual
AWS variables and files), created at each call, so importing this module needs no AWS set-up.
"""

from __future__ import annotations

import os
import re
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from core import paths
from core.errors import UserError

ENV = "TRAINWISE_STATE"
#: The folders under ``TRAINWISE_HOME`` whose files are mirrored to S3 state.
SHARED_KINDS = frozenset({"profiles", "agents"})

_S3_URL = re.compile(r"s3://([a-z0-9][a-z0-9.-]{1,61}[a-z0-9])(?:/(.*))?")


@dataclass(frozen=True)
class S3State:
    """A bucket and a key prefix (no leading or trailing slash; may be empty)."""

    bucket: str
    prefix: str = ""

    def key(self, *parts: str) -> str:
        return "/".join(p for p in (self.prefix, *parts) if p)

    @property
    def url(self) -> str:
        return f"s3://{self.bucket}/{self.prefix}".rstrip("/")


def s3_state() -> S3State | None:
    """The S3 state ``TRAINWISE_STATE`` names, or None for the local disk; a bad value is a UserError."""
    raw = os.environ.get(ENV, "").strip()
    if raw in ("", "local"):
        return None
    match = _S3_URL.fullmatch(raw)
    if match is None:
        raise UserError(
            f"{ENV}={raw!r} is not a state location; allowed: unset or 'local' (the disk under TRAINWISE_HOME), "
            "or s3://BUCKET[/PREFIX] (a bucket name of 3-63 lower-case letters, digits, dots and hyphens)"
        )
    return S3State(match[1], (match[2] or "").strip("/"))


def describe() -> str:
    """Where the shared state is, in words (for logs and ``trainwise setup``)."""
    state = s3_state()
    return f"{state.url} (S3)" if state else f"{paths.home()} (local disk)"


def _shared_key(state: S3State, path: Path) -> str | None:
    """The object key of ``path`` when it is a shared cache file under ``TRAINWISE_HOME``."""
    try:
        relative = path.resolve().relative_to(paths.home())
    except ValueError:
        return None  # a folder the caller chose (a test's root, a user's --root)
    if len(relative.parts) != 2 or relative.parts[0] not in SHARED_KINDS:
        return None
    return state.key(*relative.parts)


def _client() -> Any:
    import boto3
    from botocore.config import Config

    region = os.environ.get("AWS_REGION") or os.environ.get("AWS_DEFAULT_REGION")
    config = Config(retries={"mode": "standard", "total_max_attempts": 5}, connect_timeout=10, read_timeout=60)
    return boto3.session.Session().client("s3", region_name=region, config=config)


def pull(path: Path) -> bool:
    """Whether ``path`` exists, after fetching it from S3 state when it is missing here and shared.

    An object that is not in the bucket is a cache miss (False); any other S3 error (no access,
    no bucket) is raised, since it means the state location is wrong."""
    if path.exists():
        return True
    state = s3_state()
    key = _shared_key(state, path) if state else None
    if key is None:
        return False
    from botocore.exceptions import ClientError

    try:
        body = _client().get_object(Bucket=state.bucket, Key=key)["Body"].read()  # type: ignore[union-attr]
    except ClientError as exc:
        if exc.response.get("Error", {}).get("Code") in ("NoSuchKey", "404"):
            return False
        raise
    path.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.NamedTemporaryFile(dir=path.parent, prefix=f".{path.name}.", delete=False) as tmp:
        tmp.write(body)
    Path(tmp.name).replace(path)  # atomic: a reader sees the whole file or none
    return True


def push(path: Path) -> None:
    """Upload ``path`` to S3 state when S3 state is on and the file is a shared cache file."""
    state = s3_state()
    key = _shared_key(state, path) if state else None
    if key is not None:
        _client().put_object(Bucket=state.bucket, Key=key, Body=path.read_bytes())  # type: ignore[union-attr]


def pull_prefix(kind: str, name_prefix: str, folder: Path) -> int:
    """Fetch into ``folder`` every object of S3 state under ``<kind>/<name_prefix>`` that is
    missing there (a job's run history written on other machines); the number fetched. No S3
    state: nothing to do (0)."""
    bucket = s3_state()
    if bucket is None:
        return 0
    client = _client()
    fetched = 0
    for page in client.get_paginator("list_objects_v2").paginate(Bucket=bucket.bucket, Prefix=bucket.key(kind, name_prefix)):
        for obj in page.get("Contents", []):
            path = folder / obj["Key"].rsplit("/", 1)[-1]
            if not path.exists():
                body = client.get_object(Bucket=bucket.bucket, Key=obj["Key"])["Body"].read()
                folder.mkdir(parents=True, exist_ok=True)
                with tempfile.NamedTemporaryFile(dir=folder, prefix=f".{path.name}.", delete=False) as tmp:
                    tmp.write(body)
                Path(tmp.name).replace(path)
                fetched += 1
    return fetched


def push_new(path: Path, kind: str) -> None:
    """Upload ``path`` to ``<kind>/<file name>`` in S3 state, only if no object has that key
    (``If-None-Match: *``): a file written once, such as a run's history record, is never
    overwritten by another machine's. No S3 state: nothing to do."""
    bucket = s3_state()
    if bucket is None:
        return
    _client().put_object(Bucket=bucket.bucket, Key=bucket.key(kind, path.name), Body=path.read_bytes(), IfNoneMatch="*")
