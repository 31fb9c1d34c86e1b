"""prefect.yaml: its deployments load, point at existing flows with parameters those
flows accept, name valid workload files, and carry a valid schedule; `trainwise serve`
checks them and refuses to serve without a server (schedules would never fire)."""

from __future__ import annotations

import inspect
from pathlib import Path

import pytest
import yaml

from flows.deployments import load_deployments
from core.errors import UserError

ROOT = Path(__file__).resolve().parents[2]
PREFECT_YAML = ROOT / "prefect.yaml"


def test_deployments_point_at_the_flows() -> None:
    entries = load_deployments(PREFECT_YAML)
    assert {e.flow.name for e in entries} == {"optimize", "seraph", "intune", "intunex"}
    for e in entries:
        accepted = set(inspect.signature(e.flow.fn).parameters)
        assert set(e.parameters) <= accepted
        assert (ROOT / e.parameters.get("config", e.parameters.get("jobs", ""))).is_file()


def test_nightly_retune_is_scheduled() -> None:
    entries = {e.name: e for e in load_deployments(PREFECT_YAML)}
    nightly = entries["nightly-retune"]
    assert nightly.flow.name == "intune"
    assert [s.cron for s in nightly.schedules] == ["0 2 * * *"]
    assert nightly.schedules[0].active
    assert nightly.parameters.get("refresh_profiles") is True


def test_deployments_build_runner_deployments() -> None:
    for e in load_deployments(PREFECT_YAML):
        d = e.to_runner_deployment()
        assert d.name == e.name
        assert d.parameters == e.parameters
        assert len(d.schedules) == len(e.schedules)


def _write(tmp_path: Path, deployment: dict) -> Path:
    doc = yaml.safe_load(PREFECT_YAML.read_text())
    doc["deployments"] = [deployment]
    out = tmp_path / "prefect.yaml"
    out.write_text(yaml.safe_dump(doc))
    return out


@pytest.mark.parametrize(
    ("deployment", "message"),
    [
        ({"name": "x", "entrypoint": "flows/nope.py:nope"}, "does not exist"),
        ({"name": "x", "entrypoint": "flows/seraph.py:not_a_flow"}, "not_a_flow"),
        ({"name": "x", "entrypoint": "flows/seraph.py:seraph", "parameters": {"confg": "x"}}, "not accepted"),
        ({"name": "x", "entrypoint": "flows/seraph.py:seraph", "parameters": {"config": "configs/intune-nightly.yaml"}}, "needs a 'rl' section"),
        ({"name": "x", "entrypoint": "flows/intune.py:intune", "schedules": [{"cron": "61 * * * *"}]}, "invalid schedule"),
        ({"name": "x", "entrypoint": "flows/intune.py:intune", "schedules": [{"cron": "0 2 * * *", "interval": 60}]}, "exactly one"),
    ],
)
def test_bad_deployments_are_named(tmp_path: Path, deployment: dict, message: str) -> None:
    path = _write(tmp_path, deployment)
    with pytest.raises(UserError, match=message):
        load_deployments(path, root=ROOT)


def test_serve_refuses_without_a_server(monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    from trainwise.cli import main

    monkeypatch.chdir(ROOT)
    monkeypatch.setenv("PREFECT_API_URL", "")
    assert main(["serve"]) == 2
    assert "prefect server start" in capsys.readouterr().err
    assert main(["serve", "--dry-run"]) == 0
