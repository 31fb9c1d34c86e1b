"""Each run has its own checkpoint folder: two runs of one env and seed at once both finish,
and ``--resume`` finds the run of the same settings or names what differs."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from core.errors import UserError
from serverless.checkpoint import CHECKPOINT_FILE, read_checkpoint
from serverless.trainer import train
from serverless.run_shape import RunShape
from tests.serverless.test_checkpoint import _spec
from tests.serverless.test_rollouts import InProcess

ROOT = Path(__file__).resolve().parents[2]


def _run_dirs(home: Path) -> list[Path]:
    return sorted(p.parent for p in (home / "checkpoints" / "CartPole-v1-seed11").glob(f"*/{CHECKPOINT_FILE}"))


def test_two_concurrent_cli_runs_of_one_env_and_seed_both_finish(tmp_path: Path) -> None:
    home = tmp_path / "home"
    env = dict(os.environ, PYTHONPATH=str(ROOT), TRAINWISE_HOME=str(home))
    procs = []
    for name in ("a", "b"):
        cmd = [sys.executable, "-m", "trainwise", "rl", "train", "--env", "CartPole-v1", "--target-reward", "1e9",
               "--max-steps", "512", "--batch", "256", "--actors", "2", "--seed", "11", "--checkpoint-every", "1",
               "--no-progress", "--json-out", str(tmp_path / f"{name}.json")]
        procs.append(subprocess.Popen(cmd, cwd=ROOT, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True))
    for proc in procs:
        _, err = proc.communicate(timeout=600)
        assert proc.returncode == 0, err[-2000:]
    results = [json.loads((tmp_path / f"{n}.json").read_text()) for n in ("a", "b")]
    assert [r["env_steps"] for r in results] == [512, 512]
    folders = {r["checkpoint"] for r in results}
    assert len(folders) == 2 and {str(p) for p in _run_dirs(home)} == folders  # one folder each
    for folder in folders:
        meta, _ = read_checkpoint(Path(folder))
        assert meta["run_state"]["iteration"] == 2 and meta["identity"]["seed"] == 11
        assert sorted(p.name for p in Path(folder).iterdir()) == [CHECKPOINT_FILE]  # no stray temp files


def test_resume_without_a_folder_finds_the_run_of_the_same_settings(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TRAINWISE_HOME", str(tmp_path / "home"))
    two, four = RunShape(actors=2, memory_mb=1769, batch=256), RunShape(actors=4, memory_mb=1769, batch=256)
    a = train(_spec(None, max_steps=256, run=two), backend=InProcess(), progress=False)
    b = train(_spec(None, max_steps=256, run=four), backend=InProcess(), progress=False)  # newer, other settings
    assert a.checkpoint != b.checkpoint and len(_run_dirs(tmp_path / "home")) == 2
    resumed = train(_spec(None, max_steps=512, run=two, resume=True), backend=InProcess(), progress=False)
    assert resumed.checkpoint == a.checkpoint and resumed.env_steps == 512
    assert any(f"resumed from {a.checkpoint}" in n for n in resumed.notes)
    with pytest.raises(UserError, match=r"the newest differs in run.actors: checkpoint 2, this run 3"):
        train(_spec(None, run=RunShape(actors=3, memory_mb=1769, batch=256), resume=True),
              backend=InProcess(), progress=False)
    with pytest.raises(UserError, match="resume: no checkpoint under .*CartPole-v1-seed12"):
        train(_spec(None, seed=12, resume=True), backend=InProcess(), progress=False)


def test_no_checkpoint_no_folder(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TRAINWISE_HOME", str(tmp_path / "home"))
    result: Any = train(_spec(None, max_steps=256, checkpoint_every=0), backend=InProcess(), progress=False)
    assert result.checkpoint is None and not (tmp_path / "home" / "checkpoints").exists()


def test_cli_resume_of_another_runs_checkpoint_is_one_line_naming_what_differs(tmp_path: Path,
                                                                               capsys: pytest.CaptureFixture[str],
                                                                               monkeypatch: pytest.MonkeyPatch) -> None:
    from trainwise.cli import main

    monkeypatch.setenv("TRAINWISE_HOME", str(tmp_path / "home"))
    ck = tmp_path / "ck"
    args = ["rl", "train", "--env", "CartPole-v1", "--target-reward", "1e9", "--max-steps", "256", "--batch", "256",
            "--actors", "2", "--seed", "11", "--checkpoint-every", "1", "--no-progress", "--checkpoint-dir", str(ck)]
    assert main(args) == 0
    before = (ck / CHECKPOINT_FILE).read_bytes()
    capsys.readouterr()
    changed = [a if a != "11" else "12" for a in args]
    out = tmp_path / "resumed.json"
    assert main([*changed, "--actors", "4", "--resume", "--json-out", str(out)]) == 2
    err = [line for line in capsys.readouterr().err.splitlines() if line.strip()]
    assert len(err) == 1 and "run.actors: checkpoint 2, this run 4" in err[0] and "seed: checkpoint 11, this run 12" in err[0]
    assert not out.exists() and (ck / CHECKPOINT_FILE).read_bytes() == before
