"""The function zip: only the handler's modules, complete (importable alone), reproducible;
the layer: wheels for the runtime's Python and glibc."""

from __future__ import annotations

import json
import subprocess
import sys
import sysconfig
import zipfile
from pathlib import Path

import pytest

import serverless.lambda_package
from serverless.lambda_package import (HANDLER_ENTRY, LAMBDA_PYTHON_VERSION, build_function_zip, build_layer_zip,
                                      handler_closure)

# Runs in a fresh interpreter without site processing (so the editable install of this
# project is invisible) and with only the zip and site-packages on sys.path: the handler
# must import and run from the zip's own files.
_RUN_FROM_ZIP = r"""
import json, sys
zip_path, site_packages = sys.argv[1], sys.argv[2]
sys.path[:] = [zip_path, site_packages] + [p for p in sys.path if "site-packages" not in p and p not in ("", ".")]
import numpy as np
import serverless.handler as handler_module
from serverless.policy import encode_b64
rng = np.random.default_rng(0)
arrays = {}
for head, out in (("actor", 2), ("critic", 1)):
    sizes = (4, 8, out)
    for i in range(2):
        arrays[f"{head}.{i}.w"] = (rng.standard_normal((sizes[i], sizes[i + 1])) * 0.1).astype(np.float32)
        arrays[f"{head}.{i}.b"] = np.zeros(sizes[i + 1], dtype=np.float32)
event = {"env_id": "CartPole-v1", "num_steps": 16, "seed": 1, "actor_id": 0,
         "policy_spec": {"obs_dim": 4, "action_kind": "discrete", "act_dim": 2, "hidden": [8]},
         "weights_npz_b64": encode_b64(arrays)}
result = handler_module.handler(event, None)
print(json.dumps({
    "handler_file": handler_module.__file__,
    "env_steps": result["env_steps"],
    "project_modules": sorted(m for m in sys.modules if m.split(".")[0] in ("serverless", "trainwise")),
    "heavy": sorted(m for m in ("torch", "ray", "tensorflow", "prefect") if m in sys.modules),
}))
"""


def test_zip_holds_only_the_handler_closure(tmp_path: Path) -> None:
    report = build_function_zip(tmp_path / "rollout.zip")
    with zipfile.ZipFile(tmp_path / "rollout.zip") as archive:
        names = sorted(archive.namelist())
    assert names == report["files"]
    assert "serverless/handler.py" in names and "serverless/s3_payload.py" in names  # lazy import followed
    for unwanted in ("serverless/trainer.py", "serverless/backends/lambda_backend.py", "serverless/torch_policy.py"):
        assert unwanted not in names
    assert all(name.endswith(".py") for name in names)
    assert report["needs_layer"] == ["gymnasium", "numpy"]  # boto3 comes with the Lambda runtime
    assert report["handler"] == HANDLER_ENTRY
    modules, _ = handler_closure()
    assert len(modules) == len(names)


def test_zip_is_reproducible(tmp_path: Path) -> None:
    first = build_function_zip(tmp_path / "a.zip")
    second = build_function_zip(tmp_path / "b.zip")
    assert first["sha256"] == second["sha256"]


def test_an_env_module_that_does_not_import_is_one_line_exit_2(tmp_path: Path,
                                                                capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "rollout.zip"
    assert serverless.lambda_package.main(["--out", str(out), "--env", "no_such_module_here:Nope-v0"]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "--env" in err and "no_such_module_here" in err
    assert not out.exists()


def test_handler_runs_from_the_zip_alone(tmp_path: Path) -> None:
    zip_path = tmp_path / "rollout.zip"
    build_function_zip(zip_path)
    proc = subprocess.run(
        [sys.executable, "-S", "-c", _RUN_FROM_ZIP, str(zip_path), sysconfig.get_paths()["purelib"]],
        cwd=tmp_path, capture_output=True, text=True, timeout=120,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    out = json.loads(proc.stdout.strip().splitlines()[-1])
    assert out["handler_file"].startswith(str(zip_path))
    assert out["env_steps"] == 16
    assert out["heavy"] == []  # no torch, ray, tensorflow or prefect in the function
    with zipfile.ZipFile(zip_path) as archive:
        packed = {n[:-3].replace("/__init__", "").replace("/", ".") for n in archive.namelist()}
    assert set(out["project_modules"]) <= packed


@pytest.mark.parametrize(("arch", "machine"), [("x86_64", "x86_64"), ("arm64", "aarch64")])
def test_the_layer_is_built_for_the_runtimes_python_and_glibc(arch: str, machine: str, tmp_path: Path,
                                                              monkeypatch: pytest.MonkeyPatch) -> None:
    """pip is asked for the runtime's CPython and every manylinux Amazon Linux 2023 can load."""
    asked: list[list[str]] = []

    def pip(args: list[str], check: bool) -> None:
        asked.append(args)
        target = Path(args[args.index("--target") + 1]) / "numpy"
        target.mkdir(parents=True)
        (target / "__init__.py").write_text("")

    monkeypatch.setattr(serverless.lambda_package.subprocess, "run", pip)
    report = build_layer_zip(tmp_path / "layer.zip", arch)
    (args,) = asked
    assert args[args.index("--python-version") + 1] == LAMBDA_PYTHON_VERSION == "3.12"
    platforms = [args[i + 1] for i, arg in enumerate(args) if arg == "--platform"]
    assert platforms[0] == f"manylinux_2_34_{machine}" and platforms[-1] == f"manylinux2014_{machine}"
    assert f"manylinux_2_28_{machine}" in platforms and f"manylinux_2_35_{machine}" not in platforms
    assert report["runtime"] == "python3.12" and report["arch"] == arch
    assert zipfile.ZipFile(tmp_path / "layer.zip").namelist() == ["python/numpy/__init__.py"]
