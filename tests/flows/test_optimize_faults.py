"""Faults under the real Prefect engine (the session's test server): a task failing transiently
is retried by Prefect, a UserError is not, and a failing branch of ``optimize`` leaves the
other branch's report written while the flow's final state says why."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import yaml

from core.errors import UserError

pytestmark = pytest.mark.usefixtures("prefect_workspace")


def _no_wait(task: Any) -> Any:
    """The task with its own retry settings, minus the 10-20 s waits between attempts."""
    return task.with_options(retry_delay_seconds=0, retry_jitter_factor=None)


@pytest.mark.parametrize("fault, retried", [(TimeoutError("read timed out"), True), (ConnectionError("reset"), True),
                                            (UserError("ingestion.data.path is not a folder"), False),
                                            (ValueError("a bug"), False), (OSError("disk full"), False)])
def test_the_external_retry_policy_under_prefect(fault: Exception, retried: bool, monkeypatch: pytest.MonkeyPatch,
                                                 tmp_path: Path) -> None:
    """A real project task (locate-or-generate-data, EXTERNAL_RETRIES) whose work fails once."""
    from prefect import flow

    import ingestion.datagen
    from tasks.ingest import locate_or_generate_data

    calls: list[int] = []
    real_generate = ingestion.datagen.generate

    def generate_failing_once(*args: Any, **kwargs: Any) -> Any:
        calls.append(1)
        if len(calls) == 1:
            raise fault
        return real_generate(*args, **kwargs)

    monkeypatch.setattr(ingestion.datagen, "generate", generate_failing_once)

    seed = int.from_bytes(str(tmp_path).encode()[-6:], "big") % 10**6  # data no earlier test generated

    from optimizers.spec import DataSpec

    @flow
    def locate() -> Any:
        return _no_wait(locate_or_generate_data)(DataSpec(path=None, rows=1_000, seed=seed))

    state = locate(return_state=True)
    if retried:
        assert state.is_completed(), state.message
        assert len(calls) == 2 and Path(state.result().path).is_dir()
    else:
        assert state.is_failed() and len(calls) == 1  # failed at once: a second attempt cannot help
        with pytest.raises(type(fault)):
            state.result()


def test_a_transient_failure_that_persists_fails_after_the_retries(monkeypatch: pytest.MonkeyPatch,
                                                                    tmp_path: Path) -> None:
    from prefect import flow

    import ingestion.datagen
    from tasks.ingest import locate_or_generate_data
    from tasks.retry import EXTERNAL_RETRIES

    calls: list[int] = []

    def always_timing_out(*_a: Any, **_k: Any) -> Any:
        calls.append(1)
        raise TimeoutError("read timed out")

    monkeypatch.setattr(ingestion.datagen, "generate", always_timing_out)

    from optimizers.spec import DataSpec

    @flow
    def locate() -> Any:
        return _no_wait(locate_or_generate_data)(DataSpec(path=None, rows=1_000, seed=10**6 + 1))

    state = locate(return_state=True)
    assert state.is_failed() and len(calls) == 1 + EXTERNAL_RETRIES["retries"]


def _stand_in_seraph() -> Any:
    """A real Prefect flow in place of the Seraph branch (its training takes minutes)."""
    from prefect import flow

    from tasks.report import section

    @flow(name="seraph")
    def seraph(config: str, workload: Any = None, run_dir: str | None = None,
               refresh_profiles: bool = False) -> dict[str, Any]:
        return {"section": section("seraph", "Seraph (stand-in)", "trained: yes", summary={"reached": True}),
                "run_dir": run_dir}

    return seraph


@pytest.mark.parametrize("concurrency", ["sequential", "parallel"])
def test_a_failing_branch_leaves_the_other_report_and_the_flow_says_why(
    concurrency: str, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    import flows.optimize

    monkeypatch.setitem(flows.optimize._BRANCH_FLOWS, "seraph", _stand_in_seraph())
    workload = {"name": "halves", "concurrency": concurrency,
                "rl": {"env_id": "CartPole-v1", "target_reward": 40},
                "ingestion": {"data": {"path": str(tmp_path / "no-such-data")}, "time_budget_s": 5}}
    config = tmp_path / "w.yaml"
    config.write_text(yaml.safe_dump(workload))

    state = flows.optimize.optimize(config=str(config), return_state=True)
    assert state.is_failed()
    assert "intune: UserError: ingestion.data.path" in state.message and "report" in state.message
    partial = state.result(raise_on_failure=False)
    report = Path(partial["report"])
    assert report.is_file() and "trained: yes" in report.read_text()  # the other branch's section
    assert "The intune branch failed" in report.read_text()
    saved = json.loads((report.parent / "result.json").read_text())
    assert saved["failed_branches"].keys() == {"intune"} and saved["sections"]["seraph"] == {"reached": True}


def test_trainwise_run_names_the_failed_branch_in_one_line(monkeypatch: pytest.MonkeyPatch, tmp_path: Path,
                                                           capsys: pytest.CaptureFixture[str]) -> None:
    import flows.optimize
    from trainwise.cli import main

    monkeypatch.setitem(flows.optimize._BRANCH_FLOWS, "seraph", _stand_in_seraph())
    config = tmp_path / "w.yaml"
    config.write_text(yaml.safe_dump({"name": "halves", "concurrency": "sequential",
                                      "rl": {"env_id": "CartPole-v1", "target_reward": 40},
                                      "ingestion": {"data": {"path": str(tmp_path / "missing")}}}))
    out = tmp_path / "result.json"
    assert main(["run", "--config", str(config), "--json-out", str(out)]) == 2
    captured = capsys.readouterr()
    errors = [line for line in captured.err.splitlines() if line.startswith("trainwise: error:")]
    assert len(errors) == 1 and "the optimize flow failed" in errors[0] and "intune: UserError" in errors[0]
    assert "report:" in captured.out and not out.exists()
