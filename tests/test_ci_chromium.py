"""`.ci/chromium`, which `make test` runs before pytest: nothing to do when Chromium is there,
apt-get install where it can, and otherwise one line naming what to install and exit 1."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

SCRIPT = Path(__file__).resolve().parents[1] / ".ci" / "chromium"


def _run(path: Path, **env: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(["/bin/bash", str(SCRIPT)], env={"PATH": str(path), **env}, capture_output=True, text=True,
                          timeout=60)


def _tool(folder: Path, name: str, body: str) -> Path:
    tool = folder / name
    tool.write_text(f"#!/bin/bash\n{body}\n")
    tool.chmod(0o755)
    return tool


def test_a_chromium_on_path_or_named_needs_nothing(tmp_path: Path) -> None:
    _tool(tmp_path, "chromium", "exit 0")
    done = _run(tmp_path)
    assert done.returncode == 0 and done.stderr == ""
    browser = _tool(tmp_path / "..", "my-chrome", "exit 0")
    assert _run(tmp_path / "empty", TRAINWISE_CHROMIUM=str(browser)).returncode == 0


def test_without_chromium_or_a_way_to_install_it_one_line_says_what_to_install(tmp_path: Path) -> None:
    done = _run(tmp_path)  # no chromium, no apt-get on this PATH
    assert done.returncode == 1
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and "Chromium" in lines[0] and "apt-get install -y chromium" in lines[0]


def test_as_root_it_installs_chromium_with_apt_get(tmp_path: Path) -> None:
    if os.geteuid() != 0:
        return  # the install path runs as root (or with passwordless sudo, not arranged here)
    calls = tmp_path / "calls"
    _tool(tmp_path, "apt-get", f'echo "$@" >> {calls}\n'
                               f'if [ "$1" = install ] || [ "$3" = install ]; then printf "#!/bin/bash\\nexit 0\\n" > {tmp_path}/chromium; '
                               f"/bin/chmod +x {tmp_path}/chromium; fi")
    done = _run(tmp_path)
    assert done.returncode == 0, done.stderr
    assert calls.read_text().splitlines() == ["update -qq", "install -y -qq --no-install-recommends chromium"]
    _tool(tmp_path, "apt-get", "exit 100")  # a failing install: one line, exit 1
    (tmp_path / "chromium").unlink()
    failed = _run(tmp_path)
    assert failed.returncode == 1 and "failed" in failed.stderr.strip().splitlines()[-1]
