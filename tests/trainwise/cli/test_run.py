"""`trainwise run` and `trainwise serve` set Prefect's offline defaults only while they run:
the process's environment is the same after the command as before it."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest
import yaml

import flows
from trainwise.cli import main
from trainwise.cli.run import _PREFECT_DEFAULTS

ROOT = Path(__file__).resolve().parents[3]


class _Completed:
    def is_completed(self) -> bool:
        return True

    def result(self, raise_on_failure: bool = True) -> dict[str, Any]:
        return {"report": "report.md", "run_dir": "runs/x"}


def _stand_in_flow(seen: list[dict[str, str]], fails: bool = False) -> Any:
    """A flow that records the environment it runs in (and raises when ``fails``)."""

    def flow(**_kwargs: Any) -> _Completed:
        seen.append(dict(os.environ))
        if fails:
            raise RuntimeError("the flow broke")
        return _Completed()

    return flow


@pytest.fixture
def workload(tmp_path: Path) -> Path:
    path = tmp_path / "w.yaml"
    path.write_text(yaml.safe_dump({"name": "env", "rl": {"env_id": "CartPole-v1", "target_reward": 40}}))
    return path


def _environment() -> dict[str, str]:
    """The process's environment, less the variable pytest rewrites at each test phase."""
    return {name: value for name, value in os.environ.items() if name != "PYTEST_CURRENT_TEST"}


@pytest.fixture
def user_environment(monkeypatch: pytest.MonkeyPatch, workload: Path) -> dict[str, str]:
    """No Prefect defaults set, an empty server URL and one setting of the user's own.

    The modules the commands import are imported first: some libraries set a variable of
    their own when imported (pygame's ``PYGAME_HIDE_SUPPORT_PROMPT``), which is not the
    command's doing."""
    import flows.deployments  # noqa: F401
    from optimizers.spec import load_spec

    load_spec(workload, need="rl")
    for name in _PREFECT_DEFAULTS:
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("PREFECT_API_URL", "")
    monkeypatch.setenv("PREFECT_LOGGING_LOG_PRINTS", "false")
    return _environment()


def test_run_sets_the_defaults_while_the_flow_runs_then_restores_the_environment(
    monkeypatch: pytest.MonkeyPatch, workload: Path, user_environment: dict[str, str]
) -> None:
    seen: list[dict[str, str]] = []
    monkeypatch.setattr(flows, "get_flow", lambda name: _stand_in_flow(seen))
    assert main(["run", "--flow", "seraph", "--config", str(workload)]) == 0
    assert len(seen) == 1
    during = seen[0]
    assert "PREFECT_API_URL" not in during  # empty means no server
    assert during["MPLBACKEND"] == "Agg" and during["PREFECT_SERVER_ANALYTICS_ENABLED"] == "false"
    assert during["PREFECT_LOGGING_LOG_PRINTS"] == "false"  # the user's setting wins
    assert _environment() == user_environment


def test_run_restores_the_environment_when_the_flow_raises(
    monkeypatch: pytest.MonkeyPatch, workload: Path, user_environment: dict[str, str]
) -> None:
    seen: list[dict[str, str]] = []
    monkeypatch.setattr(flows, "get_flow", lambda name: _stand_in_flow(seen, fails=True))
    with pytest.raises(RuntimeError, match="the flow broke"):
        main(["run", "--flow", "seraph", "--config", str(workload)])
    assert seen and seen[0]["MPLBACKEND"] == "Agg"
    assert _environment() == user_environment


def test_serve_dry_run_leaves_the_environment_as_it_was(
    monkeypatch: pytest.MonkeyPatch, user_environment: dict[str, str]
) -> None:
    monkeypatch.chdir(ROOT)
    assert main(["serve", "--dry-run"]) == 0
    assert _environment() == user_environment
