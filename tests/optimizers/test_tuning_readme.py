"""The README's "Tune your own tf.data pipeline" example runs as written (with a small budget)."""

from __future__ import annotations

import os
import re
import sys
from pathlib import Path

import pytest

README = Path(__file__).resolve().parents[2] / "README.md"


def _example_blocks() -> list[str]:
    """The python code blocks of the README's own-pipeline section, in order."""
    text = README.read_text()
    section = text.split("## Tune your own tf.data pipeline", 1)[1].split("\n## ", 1)[0]
    return re.findall(r"```python\n(.*?)```", section, flags=re.S)


def _write_csv_shards(folder: Path, shards: int = 2, rows: int = 4096) -> None:
    folder.mkdir()
    line = ",".join(f"{i}.5" for i in range(8)) + "\n"
    for shard in range(shards):
        (folder / f"part-{shard}.csv").write_text(line * rows)


@pytest.mark.slow  # a real tuning run: the measurement worker imports TensorFlow
def test_the_own_pipeline_example_runs_as_written(tmp_path, monkeypatch, capsys):
    module, usage = _example_blocks()
    assert module.startswith("# mypipes.py")
    (tmp_path / "mypipes.py").write_text(module)
    _write_csv_shards(tmp_path / "logs")
    small = usage.replace("time_budget_s=120", "time_budget_s=20")
    assert small != usage  # the example still names its budget where this test shortens it
    monkeypatch.chdir(tmp_path)
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join([str(tmp_path), *sys.path]))  # the worker imports mypipes
    namespace: dict = {}
    exec(compile(small, "README.md", "exec"), namespace)
    result = namespace["result"]
    printed = capsys.readouterr().out.split()
    assert result.rows_per_s > 0 and printed[-2] == str(result.rows_per_s)
    assert set(result.config) == {"read", "parse", "prefetch"}
