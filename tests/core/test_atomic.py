"""The one atomic writer: whole or nothing, a unique temporary name per write, and an OSError
as one line that names the path while the previous file stays."""

from __future__ import annotations

import errno
import json
import os
import stat
import threading
from pathlib import Path
from typing import Any

import pytest

from core import atomic
from core.errors import UserError


def test_a_write_is_whole_and_leaves_no_temporary_file(tmp_path: Path) -> None:
    path = atomic.write_text(tmp_path / "sub" / "a.txt", "hello\n")
    assert path.read_text() == "hello\n"
    assert sorted(p.name for p in path.parent.iterdir()) == ["a.txt"]
    assert stat.S_IMODE(path.stat().st_mode) == 0o666 & ~atomic._UMASK  # not mkstemp's 0600


def test_concurrent_writers_of_one_file_never_meet(tmp_path: Path) -> None:
    """Eight threads rewrite one file; every read sees one writer's whole payload."""
    path = tmp_path / "shared.json"
    atomic.write_text(path, json.dumps({"writer": -1, "pad": "x" * 50_000}))
    errors: list[BaseException] = []
    stop = threading.Event()

    def writer(n: int) -> None:
        try:
            for _ in range(25):
                atomic.write_text(path, json.dumps({"writer": n, "pad": "x" * 50_000}))
        except BaseException as exc:  # noqa: BLE001 - reported below
            errors.append(exc)

    def reader() -> None:
        while not stop.is_set():
            try:
                assert len(json.loads(path.read_text())["pad"]) == 50_000
            except BaseException as exc:  # noqa: BLE001
                errors.append(exc)
                return

    threads = [threading.Thread(target=writer, args=(n,)) for n in range(8)]
    watcher = threading.Thread(target=reader)
    watcher.start()
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    stop.set()
    watcher.join()
    assert errors == []
    assert sorted(p.name for p in tmp_path.iterdir()) == ["shared.json"]


@pytest.mark.parametrize("where", ["write", "fsync", "replace"])
def test_a_full_disk_is_one_line_naming_the_path_and_the_old_file_stays(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, where: str
) -> None:
    path = atomic.write_text(tmp_path / "result.json", '{"old": true}\n')

    def full(*_: Any, **__: Any) -> None:
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

    if where == "write":
        with pytest.raises(UserError) as info:
            atomic.write_with(path, full)
    else:
        monkeypatch.setattr(atomic.os, where, full)
        with pytest.raises(UserError) as info:
            atomic.write_text(path, '{"new": true}\n')
    message = str(info.value)
    assert "\n" not in message and str(path) in message and "No space left on device" in message
    monkeypatch.undo()
    assert path.read_text() == '{"old": true}\n'
    assert sorted(p.name for p in tmp_path.iterdir()) == ["result.json"]  # the temporary file is gone


def test_a_folder_that_cannot_be_made_is_one_line(tmp_path: Path) -> None:
    (tmp_path / "a-file").write_text("x")
    with pytest.raises(UserError, match=r"cannot write .*a-file/out.json: "):
        atomic.write_text(tmp_path / "a-file" / "out.json", "{}")


def test_a_device_or_folder_is_refused(tmp_path: Path) -> None:
    with pytest.raises(UserError, match="not a regular file"):
        atomic.write_text(tmp_path, "x")


def test_a_figure_is_saved_in_the_format_of_its_suffix(tmp_path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots()
    ax.plot([0, 1], [1, 0])
    png = atomic.save_figure(fig, tmp_path / "plot.png")
    svg = atomic.save_figure(fig, tmp_path / "plot.svg")
    plt.close(fig)
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert b"<svg" in svg.read_bytes()[:500]


def test_the_cli_keeps_a_result_the_disk_refused(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: Any) -> None:
    """``--json-out`` on a full disk: exit 2, one line naming the file, the result on stdout."""
    from trainwise.cli import main

    out = tmp_path / "result.json"
    real_fsync = os.fsync

    def full_for_results(fd: int) -> None:
        if os.readlink(f"/proc/self/fd/{fd}").endswith(".tmp") and ".result.json." in os.readlink(f"/proc/self/fd/{fd}"):
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
        real_fsync(fd)

    monkeypatch.setattr(atomic.os, "fsync", full_for_results)
    code = main(["ingest", "gen-data", "--rows", "40", "--format", "tsv", "--out", str(tmp_path / "data"),
                 "--shards", "2", "--json-out", str(out)])
    captured = capsys.readouterr()
    assert code == 2
    errors = [line for line in captured.err.splitlines() if line.startswith("trainwise: error:")]
    assert len(errors) == 1 and str(out) in errors[0] and "No space left on device" in errors[0]
    assert json.loads(captured.out[captured.out.index("{"):])["rows"] == 40  # the result, not lost
    assert not out.exists() and sorted(p.name for p in (tmp_path / "data").iterdir())[-1] == "part-00001.tsv"
