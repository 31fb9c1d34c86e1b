"""The flows under one session-wide Prefect test server, on a tiny workload: states,
artifacts (keys and contents), report and plots on disk, profile cache hits on a
second run and misses when the workload changes, and a bad workload file failing
before any task runs."""

from __future__ import annotations

from pathlib import Path
from typing import Any, Iterator

import pytest
import yaml

TINY: dict[str, Any] = {
    "name": "tiny",
    "rl": {"env_id": "CartPole-v1", "target_reward": 40, "seed": 0, "max_steps": 30_000, "baselines": ["static"]},
    "ingestion": {
        "data": {"rows": 4000},
        "optimizer": "intune",
        "baselines": ["naive"],
        "time_budget_s": 8,
        "batch_size": 256,
        "profile_window_s": 0.3,
        "verify_window_s": 0.5,
        "verify_repeats": 1,
    },
}


@pytest.fixture(scope="module")
def workspace(prefect_harness: None, tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Path]]:
    """A trainwise home and runs folder for this module only (cache shared by its runs)."""
    root = tmp_path_factory.mktemp("prefect-flows")
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("TRAINWISE_HOME", str(root / "home"))
        mp.setenv("TRAINWISE_RUNS", str(root / "runs"))
        yield {"root": root}


def _config(root: Path, name: str, data: dict[str, Any]) -> str:
    path = root / f"{name}.yaml"
    path.write_text(yaml.safe_dump(data))
    return str(path)


def _run(flow_name: str, config: str) -> tuple[Any, dict[str, Any]]:
    from flows import get_flow

    state = get_flow(flow_name)(config=config, return_state=True)
    assert state.is_completed(), state.message
    return state, state.result()


def _artifact(key: str) -> Any:
    from prefect.artifacts import Artifact

    art = Artifact.get(key)
    assert art is not None, f"no artifact {key!r}"
    return art


@pytest.fixture(scope="module")
def first_run(workspace: dict[str, Path]) -> dict[str, Any]:
    _, result = _run("optimize", _config(workspace["root"], "tiny", TINY))
    return result


@pytest.fixture(scope="module")
def second_run(first_run: dict[str, Any], workspace: dict[str, Path]) -> dict[str, Any]:
    # The same workload, with the branches forced to run at once: the cache keys depend on
    # the rl/ingestion sections only, so this must still hit both profiles.
    _, result = _run("optimize", _config(workspace["root"], "tiny-parallel", {**TINY, "concurrency": "parallel"}))
    return result


def test_first_run_measures_profiles_and_reports(first_run: dict[str, Any]) -> None:
    assert first_run["profile_cache"] == {"seraph": False, "intune": False}
    from tasks.branches import MIN_CORES_FOR_PARALLEL, usable_cores

    assert first_run["parallel"] is (usable_cores() >= MIN_CORES_FOR_PARALLEL)  # concurrency: auto
    run_dir = Path(first_run["run_dir"])
    report = Path(first_run["report"]).read_text()
    assert report.startswith("# trainwise optimize: tiny")
    assert "## Seraph: CartPole-v1" in report and "## InTune: ingestion pipeline" in report
    assert "measured (not cached)" in report
    for rel in ("seraph/reward.png", "seraph/pareto.png", "intune/throughput.png"):
        png = run_dir / rel
        assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n", rel
        assert f"]({rel})" in report  # linked from the report
    assert (run_dir / "result.json").is_file()
    seraph = first_run["sections"]["seraph"]
    assert seraph["achieved"]["reached"] is True
    assert {"actors", "memory_mb", "batch"} <= set(seraph["chosen"])
    assert [b["baseline"] for b in seraph["baselines"]] == ["static"]
    assert seraph["baselines"][0]["config"] == {"actors": 2, "memory_mb": 1769, "batch": 4000}
    names = [row["optimizer"] for row in first_run["sections"]["intune"]["optimizers"]]
    assert names == ["intune", "naive"]


def test_artifacts_have_keys_and_contents(first_run: dict[str, Any]) -> None:
    import json

    report = _artifact("tiny-report")
    assert report.type == "markdown"
    assert "Seraph" in report.data and "InTune" in report.data
    assert report.data.count("](data:image/png;base64,") == 3 and "file://" not in report.data  # plots inline
    for key in ("tiny-seraph-reward-plot", "tiny-seraph-pareto-plot", "tiny-intune-throughput-plot"):
        plot = _artifact(key)
        assert plot.type == "image" and plot.data.startswith("data:image/png;base64,"), key
    plan = _artifact("tiny-seraph-plan")
    assert plan.type == "table"
    rows = json.loads(plan.data) if isinstance(plan.data, str) else plan.data
    assert [r["row"] for r in rows][0] == "chosen (predicted)"
    assert any(r["row"].startswith("baseline static (trained") and r["batch"] == "4000" for r in rows)
    optimizers = _artifact("tiny-intune-optimizers")
    rows = json.loads(optimizers.data) if isinstance(optimizers.data, str) else optimizers.data
    assert {r["optimizer"] for r in rows} == {"intune", "naive"}
    for key in ("tiny-seraph-progress", "tiny-intune-progress"):
        progress = _artifact(key)
        assert progress.type == "progress"
        assert float(progress.data) == pytest.approx(100.0)


def test_second_run_reuses_profiles_and_keeps_the_first(first_run: dict[str, Any], second_run: dict[str, Any]) -> None:
    assert second_run["profile_cache"] == {"seraph": True, "intune": True}
    assert second_run["parallel"] is True
    assert {"seraph", "intune"} == set(second_run["sections"])
    assert "cached (reused" in Path(second_run["report"]).read_text()
    assert second_run["run_dir"] != first_run["run_dir"]
    first_report = Path(first_run["report"]).read_text()
    assert "measured (not cached)" in first_report  # never overwritten


def test_changed_workload_is_profiled_again(second_run: dict[str, Any], workspace: dict[str, Path]) -> None:
    changed = {"name": "tiny", "rl": {**TINY["rl"], "max_steps": 31_000, "baselines": []}}
    _, result = _run("seraph", _config(workspace["root"], "tiny-changed", changed))
    assert result["profile_cache"] == {"seraph": False}


def test_bad_workload_fails_before_any_task(workspace: dict[str, Path]) -> None:
    from prefect.client.orchestration import get_client
    from prefect.client.schemas.filters import FlowRunFilter, FlowRunFilterId

    from flows import get_flow

    bad = {**TINY, "rl": {**TINY["rl"], "objective": "cheapest"}}
    state = get_flow("optimize")(config=_config(workspace["root"], "bad", bad), return_state=True)
    assert state.is_failed()
    with pytest.raises(Exception, match="rl.objective"):
        state.result()
    with get_client(sync_client=True) as client:
        runs = client.read_task_runs(flow_run_filter=FlowRunFilter(id=FlowRunFilterId(any_=[state.state_details.flow_run_id])))
    assert runs == []
