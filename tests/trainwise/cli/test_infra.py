"""`trainwise infra`: clear failure without terraform, the calls it makes, the config it writes."""

from __future__ import annotations

import json
import os
import stat
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

from trainwise.cli import main

ROOT = Path(__file__).resolve().parents[3]
EXAMPLE = ROOT / "infra" / "terraform" / "envs" / "dev" / "outputs.example.json"
TRAINWISE = Path(sys.executable).parent / "trainwise"

# A stand-in `terraform` that logs its arguments and prints the example outputs for `output -json`.
FAKE_TERRAFORM = f"""#!{sys.executable}
import json, os, sys
with open(os.environ["FAKE_TF_LOG"], "a") as log:
    log.write(json.dumps({{"args": sys.argv[1:], "cwd": os.getcwd()}}) + "\\n")
if sys.argv[1:3] == ["output", "-json"]:
    sys.stdout.write(open({str(EXAMPLE)!r}).read())
"""


@pytest.fixture
def fake_terraform(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    script = bin_dir / "terraform"
    script.write_text(FAKE_TERRAFORM)
    script.chmod(script.stat().st_mode | stat.S_IEXEC)
    log = tmp_path / "tf.log"
    monkeypatch.setenv("PATH", str(bin_dir))
    monkeypatch.setenv("FAKE_TF_LOG", str(log))
    return log


def _calls(log: Path) -> list[dict]:
    return [json.loads(line) for line in log.read_text().splitlines()]


def test_plan_without_terraform_fails_cleanly_with_install_help(tmp_path: Path) -> None:
    env = {**os.environ, "PATH": str(tmp_path)}  # neither terraform nor tofu
    proc = subprocess.run([str(TRAINWISE), "infra", "plan"], capture_output=True, text=True, env=env, timeout=120)
    assert proc.returncode == 2
    assert "Traceback" not in proc.stderr
    assert "terraform" in proc.stderr and "tofu" in proc.stderr and "Install" in proc.stderr


def test_plan_builds_the_zip_and_passes_its_path(fake_terraform: Path, tmp_path: Path) -> None:
    zip_path = tmp_path / "out" / "rollout.zip"
    assert main(["infra", "plan", "--package-zip", str(zip_path), "--layer-zip", "", "--var", "learner_count=0"]) == 0
    calls = _calls(fake_terraform)
    assert [c["args"][0] for c in calls] == ["init", "plan"]
    assert calls[1]["cwd"].endswith("infra/terraform/envs/dev")
    args = calls[1]["args"]
    assert f"package_zip_path={zip_path}" in args and "layer_zip_path=" in args and "learner_count=0" in args
    assert zip_path.is_file()


def test_apply_and_destroy_pass_auto_approve(fake_terraform: Path, tmp_path: Path) -> None:
    zip_path = tmp_path / "rollout.zip"
    assert main(["infra", "apply", "--auto-approve", "--package-zip", str(zip_path), "--layer-zip", ""]) == 0
    assert main(["infra", "destroy", "--auto-approve", "--package-zip", str(zip_path), "--layer-zip", ""]) == 0
    actions = [c["args"] for c in _calls(fake_terraform) if c["args"][0] != "init"]
    assert actions[0][0] == "apply" and "-auto-approve" in actions[0]
    assert actions[1][0] == "destroy" and "-auto-approve" in actions[1]


def test_output_write_turns_terraform_outputs_into_the_backend_config(fake_terraform: Path, tmp_path: Path) -> None:
    from serverless.lambda_config import LambdaConfig

    target = tmp_path / ".trainwise" / "aws.json"
    assert main(["infra", "output", "--write", str(target)]) == 0
    config = json.loads(target.read_text())
    example = {k: v["value"] for k, v in json.loads(EXAMPLE.read_text()).items()}
    assert config["function_name"] == example["rollout_function_name"]
    assert config["function_arn"] == example["rollout_function_arn"]
    assert config["bucket"] == example["artifacts_bucket"] and config["region"] == example["aws_region"]
    assert config["learner_instance_ids"] == example["learner_instance_ids"]
    loaded = LambdaConfig.from_file(target)
    assert loaded.timeout_s == 300 and loaded.reserved_concurrency == 20


def test_bad_input_is_refused_before_anything_runs(fake_terraform: Path, tmp_path: Path,
                                                    capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["infra", "plan", "--dir", str(tmp_path)]) == 2
    assert "not a Terraform root module" in capsys.readouterr().err
    assert main(["infra", "plan", "--var", "no_equals_sign"]) == 2
    assert "NAME=VALUE" in capsys.readouterr().err
    assert main(["infra", "plan", "--layer-zip", str(tmp_path / "missing.zip"),
                 "--package-zip", str(tmp_path / "r.zip")]) == 2
    assert "--layer" in capsys.readouterr().err
    assert main(["infra", "output", "--write", str(tmp_path)]) == 2
    assert "is a directory" in capsys.readouterr().err
    empty = tmp_path / "empty.json"
    empty.write_text("{}")
    assert main(["infra", "output", "--from-json", str(empty), "--write", str(tmp_path / "c.json")]) == 2
    assert "rollout_function_name" in capsys.readouterr().err
    assert not (tmp_path / "c.json").exists()  # nothing half-written
    assert not fake_terraform.exists()  # terraform was never called


def test_plan_ships_the_users_env_module_in_the_zip(fake_terraform: Path, tmp_path: Path,
                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    from tests.serverless.test_user_env import _forget, _write_env_module

    env_id = _write_env_module(tmp_path, "infra_user_envs")
    monkeypatch.syspath_prepend(str(tmp_path))
    zip_path = tmp_path / "out" / "rollout.zip"
    try:
        assert main(["infra", "plan", "--env", env_id, "--package-zip", str(zip_path), "--layer-zip", ""]) == 0
    finally:
        _forget("infra_user_envs")
    names = zipfile.ZipFile(zip_path).namelist()
    assert "infra_user_envs.py" in names and "serverless/handler.py" in names
    assert f"package_zip_path={zip_path}" in _calls(fake_terraform)[1]["args"]


def test_an_env_module_that_does_not_import_is_one_line_before_terraform_runs(
        fake_terraform: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    zip_path = tmp_path / "rollout.zip"
    assert main(["infra", "apply", "--env", "no_such_module_here:Nope-v0", "--package-zip", str(zip_path)]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "--env" in err and "no_such_module_here" in err and "sys.path" in err
    assert not zip_path.exists() and not fake_terraform.exists()  # nothing built, terraform never called
