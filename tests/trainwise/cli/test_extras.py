"""The extras: a node with only ``trainwise[ingest]`` runs the ingestion commands, and a command
whose extra is missing says which extra in one line (exit 2).

Each case runs the CLI in a fresh interpreter whose import system refuses the engines of the
extras that are "not installed" (a meta-path finder raising ``ModuleNotFoundError`` as a missing
package does), so the test sees what a lean install sees: the first import of torch or gymnasium
on a command's path, wherever it is. The real lean install is documented in README.md
("Install"), with its command and output.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from core.extras import EXTRA_OF_MODULE, extra_for, missing_extra, missing_extra_message

ROOT = Path(__file__).resolve().parents[3]

_RUNNER = """
import importlib.abc, sys
BLOCKED = set(sys.argv[1].split(","))

class _NotInstalled(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path=None, target=None):
        if name.split(".")[0] in BLOCKED:
            raise ModuleNotFoundError(f"No module named {name!r}", name=name)
        return None

sys.meta_path.insert(0, _NotInstalled())
from trainwise.cli import main
code = main(sys.argv[2:])
assert not BLOCKED & set(m.split(".")[0] for m in sys.modules), "a blocked module was imported"
sys.exit(code)
"""

#: What an ingestion node (``trainwise[ingest]``) lacks.
NOT_ON_AN_INGEST_NODE = "torch,gymnasium,pygame,Box2D,ray,threadpoolctl"


def _trainwise(blocked: str, *argv: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": str(ROOT), "TF_CPP_MIN_LOG_LEVEL": "2"}
    return subprocess.run([sys.executable, "-c", _RUNNER, blocked, *argv], cwd=cwd, env=env,
                          capture_output=True, text=True, timeout=300)


def test_rl_train_without_the_rl_extra_is_one_line(tmp_path: Path) -> None:
    out = _trainwise(NOT_ON_AN_INGEST_NODE, "rl", "train", "--env", "CartPole-v1", "--target-reward", "100",
                     cwd=tmp_path)
    assert out.returncode == 2, out.stderr
    assert out.stderr.strip() == "trainwise: error: " + missing_extra_message("rl")
    assert "Traceback" not in out.stderr


@pytest.fixture(scope="module")
def lean_data(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Criteo-format shards written by ``gen-data`` on a node without the RL engines."""
    root = tmp_path_factory.mktemp("lean-node")
    gen = _trainwise(NOT_ON_AN_INGEST_NODE, "ingest", "gen-data", "--rows", "2000", "--format", "tsv",
                     "--out", str(root / "data"), cwd=root)
    assert gen.returncode == 0, gen.stderr
    return root / "data"


def test_intune_on_an_ingest_node_names_the_rl_extra(lean_data: Path, tmp_path: Path) -> None:
    out = _trainwise(NOT_ON_AN_INGEST_NODE, "ingest", "tune", "--data", str(lean_data),
                     "--optimizer", "intune", "--time-budget-s", "5", cwd=tmp_path)
    assert out.returncode == 2, out.stderr
    last = out.stderr.strip().splitlines()[-1]
    assert last == "trainwise: error: optimizer 'intune': " + missing_extra_message("rl")


def test_ingest_bench_runs_without_torch_gymnasium_pygame_or_box2d(lean_data: Path, tmp_path: Path) -> None:
    knobs = {"read_parallelism": 1, "cycle_length": 1, "shuffle_buffer": 256, "batch_size": 256,
             "parse_parallelism": 1, "transform_parallelism": 1, "prefetch_buffer": 1}
    (tmp_path / "knobs.json").write_text(json.dumps(knobs))
    result = tmp_path / "bench.json"
    out = _trainwise(NOT_ON_AN_INGEST_NODE, "ingest", "bench", "--config", "knobs.json", "--data", str(lean_data),
                     "--warmup-s", "0.2", "--window-s", "0.5", "--repeats", "1", "--json-out", str(result),
                     cwd=tmp_path)
    assert out.returncode == 0, out.stderr
    measured = json.loads(result.read_text())
    assert measured["rows_per_s"] > 0


def test_missing_extra_names_the_extra_only_for_an_extras_module() -> None:
    assert extra_for("tensorflow.python.data") == "ingest"
    assert extra_for("torch") == "rl" and extra_for("Box2D") == "box2d" and extra_for("ray") == "ray"
    assert extra_for("numpy") is None and extra_for(None) is None
    assert missing_extra(ModuleNotFoundError("No module named 'torch'", name="torch")) == (
        "the 'rl' extra is not installed: pip install 'trainwise[rl]'"
    )
    assert missing_extra(ModuleNotFoundError("No module named 'yaml'", name="yaml")) is None
    assert missing_extra(ValueError("torch")) is None


def test_every_extra_named_in_the_map_exists_in_pyproject() -> None:
    import tomllib

    extras = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["optional-dependencies"]
    assert set(EXTRA_OF_MODULE.values()) <= set(extras)
    assert {"rl", "ingest", "box2d", "ray", "aws", "bench", "dev"} <= set(extras)


def _closure(requirements: list[str]) -> set[str]:
    """The installed distributions a list of requirements pulls in, transitively (markers
    evaluated here, each requirement's own extras followed)."""
    from importlib import metadata

    from packaging.requirements import Requirement
    from packaging.utils import canonicalize_name

    seen: set[tuple[str, tuple[str, ...]]] = set()
    todo = [(Requirement(r), "") for r in requirements]
    while todo:
        req, extra = todo.pop()
        if req.marker is not None and not req.marker.evaluate({"extra": extra}):
            continue
        key = (canonicalize_name(req.name), tuple(sorted(req.extras)))
        if key in seen:
            continue
        seen.add(key)
        try:
            dist = metadata.distribution(req.name)
        except metadata.PackageNotFoundError:
            continue
        for text in dist.requires or []:
            child = Requirement(text)
            for wanted in ("", *req.extras):
                todo.append((child, wanted))
    return {name for name, _ in seen}


def test_the_ingest_extra_and_the_core_pull_in_no_rl_engine() -> None:
    """The install of ``trainwise[ingest]``, as the installed packages' own metadata says:
    TensorFlow and the agent's server, and no torch, gymnasium, pygame, Box2D or Ray."""
    import tomllib

    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    pulled = _closure([*project["dependencies"], *project["optional-dependencies"]["ingest"]])
    assert {"tensorflow-cpu", "uvicorn", "starlette", "prefect"} <= pulled
    assert not {"torch", "gymnasium", "pygame", "box2d", "ray", "triton"} & pulled
    assert "torch" in _closure(project["optional-dependencies"]["rl"])  # the check can see an engine
