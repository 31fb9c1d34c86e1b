"""requirements.lock (``make lock``) matches pyproject.toml: every requirement of the core and
of every extra is pinned in it at a version the requirement admits, and nothing in it points at
a local path."""

from __future__ import annotations

import re
import tomllib
from pathlib import Path

from packaging.requirements import Requirement
from packaging.utils import canonicalize_name
from packaging.version import Version

ROOT = Path(__file__).resolve().parents[1]


def _pins() -> dict[str, Version]:
    pins: dict[str, Version] = {}
    for line in (ROOT / "requirements.lock").read_text().splitlines():
        match = re.fullmatch(r"([A-Za-z0-9_.\-]+)==(\S+)", line.strip())
        if match:
            pins[canonicalize_name(match[1])] = Version(match[2])
    return pins


def _requirements() -> list[Requirement]:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    texts = [*project["dependencies"], *(r for extra in project["optional-dependencies"].values() for r in extra)]
    return [r for r in map(Requirement, texts) if canonicalize_name(r.name) != "trainwise"]


def test_every_requirement_is_pinned_in_the_lock_within_its_range() -> None:
    pins = _pins()
    for req in _requirements():
        name = canonicalize_name(req.name)
        assert name in pins, f"{req} is not in requirements.lock: run `make lock`"
        assert req.specifier.contains(pins[name], prereleases=True), f"lock pins {name}=={pins[name]}, outside {req}"


def test_the_lock_pins_torchs_cpu_build_and_no_local_path() -> None:
    text = (ROOT / "requirements.lock").read_text()
    assert str(_pins()["torch"]) == "2.13.0+cpu"
    assert not re.search(r"^[^#\s].*(@ file:|^-e )", text, flags=re.M)
    assert not any(canonicalize_name(n).startswith("nvidia-") or n == "triton" for n in _pins())
