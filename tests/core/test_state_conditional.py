"""Writes to S3 state are conditional: two homes that share a profile or an agent never
overwrite each other silently (moto's server on loopback answers If-Match / If-None-Match
as S3 does: 412 PreconditionFailed)."""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

import pytest

from core import state
from tests.tasks.test_shared_state import BUCKET, PREFIX, bucket  # noqa: F401 - the fixture

def _home(monkeypatch: pytest.MonkeyPatch, root: Path, name: str) -> Path:
    monkeypatch.setenv("TRAINWISE_HOME", str(root / name))
    profiles = root / name / "profiles"
    profiles.mkdir(parents=True, exist_ok=True)
    return profiles


def _body(s3: Any, name: str) -> bytes:
    return s3.get_object(Bucket=BUCKET, Key=f"{PREFIX}/profiles/{name}")["Body"].read()


def test_put_object_if_creates_once_then_only_over_the_version_read(bucket: Any) -> None:
    etag = state.put_object_if(BUCKET, "runs/history.jsonl", b"one\n", etag=None)
    with pytest.raises(state.StateConflict, match="already exists"):
        state.put_object_if(BUCKET, "runs/history.jsonl", b"other home\n", etag=None)
    newer = state.put_object_if(BUCKET, "runs/history.jsonl", b"one\ntwo\n", etag=etag)
    with pytest.raises(state.StateConflict, match="changed since this home read it"):
        state.put_object_if(BUCKET, "runs/history.jsonl", b"one\nstale\n", etag=etag)
    got = state.get_object(BUCKET, "runs/history.jsonl")
    assert got == (b"one\ntwo\n", newer)
    assert state.get_object(BUCKET, "runs/none") is None


def test_two_homes_never_overwrite_each_other_silently(
    bucket: Any, monkeypatch: pytest.MonkeyPatch, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    first = _home(monkeypatch, tmp_path, "first") / "p.json"
    first.write_text("first v1")
    assert state.push(first) is True

    second = _home(monkeypatch, tmp_path, "second") / "p.json"
    second.write_text("second, made without reading the bucket")
    with caplog.at_level(logging.WARNING, logger="trainwise.state"):
        assert state.push(second) is False  # the object exists: not overwritten
    assert "already exists" in caplog.text and "p.json" in caplog.text
    assert _body(bucket, "p.json") == b"first v1"

    third = _home(monkeypatch, tmp_path, "third") / "p.json"
    assert state.pull(third) and third.read_text() == "first v1"  # reads it, with its ETag
    third.write_text("third, over first v1")
    assert state.push(third) is True
    assert _body(bucket, "p.json") == b"third, over first v1"

    _home(monkeypatch, tmp_path, "first")
    first.write_text("first v2, over its own v1")  # the bucket moved on since the first home wrote
    caplog.clear()
    with caplog.at_level(logging.WARNING, logger="trainwise.state"):
        assert state.push(first) is False
    assert "changed since this home read it" in caplog.text
    assert _body(bucket, "p.json") == b"third, over first v1"

    _home(monkeypatch, tmp_path, "third")
    third.write_text("third v2")
    assert state.push(third) is True  # its own last write is still the bucket's version
    assert _body(bucket, "p.json") == b"third v2"
