"""Kill -9 a writer in the middle of a write: the agent file, a profile, a checkpoint and a run's
history record each
read back whole (the previous generation), the next run reads and writes them as usual, and the
dead writer's temporary file never shadows the real one."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from dataclasses import replace
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


def _kill_mid_write(kind: str, path: Path, half: bool) -> None:
    env = dict(os.environ, PYTHONPATH=str(ROOT), HALF="1" if half else "0")
    proc = subprocess.Popen([sys.executable, "-m", "tests.core.crash_writer", kind, str(path)], cwd=ROOT, env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        line = proc.stdout.readline()  # type: ignore[union-attr]
        assert line.strip() == "mid-write", f"the writer did not reach its write: {line!r} {proc.stderr.read()[-2000:]}"  # type: ignore[union-attr]
        proc.send_signal(signal.SIGKILL)
        proc.wait(timeout=30)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert proc.returncode == -signal.SIGKILL


def _leftovers(folder: Path) -> list[str]:
    return sorted(p.name for p in folder.iterdir() if p.name.endswith(".tmp"))


@pytest.mark.parametrize("half", [False, True], ids=["before-rename", "half-written"])
def test_an_agent_file_survives_a_kill_mid_write(tmp_path: Path, half: bool) -> None:
    from optimizers.intune.agent import MaskedDQN

    base = tmp_path / "agents" / "intune-x"
    _kill_mid_write("agent", base, half)
    assert _leftovers(base.parent), "the writer was killed inside a write"
    assert MaskedDQN.load(base).info == {"generation": 1}  # the previous agent, whole
    MaskedDQN(seed=3, info={"generation": 3}).save(base)  # the next run writes as usual
    assert MaskedDQN.load(base).info == {"generation": 3}


def test_an_agent_file_truncated_by_an_older_writer_is_a_user_error_not_a_traceback(tmp_path: Path) -> None:
    """A file cut short some other way (an older version, a full disk) is refused with a
    UserError, which InTune's loader answers by falling back to the committed agent."""
    from core.errors import UserError
    from optimizers.intune.agent import MaskedDQN

    base = tmp_path / "intune-x"
    npz, spec = MaskedDQN(seed=1).save(base)
    whole = spec.read_bytes()
    spec.write_bytes(whole[: len(whole) // 2])
    with pytest.raises(UserError, match="not readable as an InTune agent"):
        MaskedDQN.load(base)
    spec.write_bytes(whole)
    npz.write_bytes(npz.read_bytes()[:100])
    with pytest.raises(UserError, match="cannot be loaded"):
        MaskedDQN.load(base)


@pytest.mark.parametrize("half", [False, True], ids=["before-rename", "half-written"])
def test_a_profile_survives_a_kill_mid_write(tmp_path: Path, half: bool) -> None:
    from optimizers.seraph.pilot import workload_for
    from optimizers.seraph.workload_profile import load_profile

    folder = tmp_path / "profiles"
    _kill_mid_write("profile", folder, half)
    assert _leftovers(folder)
    prof = load_profile(workload_for("CartPole-v1", None).key_dict(), "local", root=folder)
    assert prof is not None and prof.pilot.iterations == 1


@pytest.mark.parametrize("half", [False, True], ids=["before-rename", "half-written"])
def test_a_checkpoint_survives_a_kill_mid_write(tmp_path: Path, half: bool) -> None:
    from serverless.checkpoint import read_checkpoint

    folder = tmp_path / "ckpt"
    _kill_mid_write("checkpoint", folder, half)
    assert _leftovers(folder)
    meta, arrays = read_checkpoint(folder)
    assert meta["run_state"] == {"iteration": 1}
    assert float(arrays["t0"][0, 0]) == 1.0


@pytest.mark.parametrize("half", [False, True], ids=["before-rename", "half-written"])
def test_a_history_record_survives_a_kill_mid_write(tmp_path: Path, half: bool,
                                                     capsys: pytest.CaptureFixture[str]) -> None:
    """A run killed while recording leaves the job's earlier records whole, no half record the
    next run would have to skip, and the next run records as usual."""
    from optimizers.seraph.history import History, JobKey

    folder = tmp_path / "history"
    _kill_mid_write("history", folder, half)
    assert _leftovers(folder)
    h = History(JobKey.of("CartPole-v1", {}, 150.0, {"gamma": 0.99}, 300_000), root=folder)
    assert [r.seed for r in h.runs()] == [1] and capsys.readouterr().err == ""
    h.record(replace(h.runs()[0], seed=3))
    assert sorted(r.seed for r in h.runs()) == [1, 3]
