"""A flow run's plots, seen in the Prefect UI by a real browser (headless Chromium).

A Prefect server with its UI (``prefect server start``; the test harness's server serves
no UI) gets one small ``seraph`` run; Chromium opens the run's page, its Artifacts tab, the
reward plot's image artifact and the report artifact, and checks the plots are drawn: each
``<img>`` has the artifact's URL, has loaded and decoded to the PNG's own size. The
screenshots are kept under ``$TRAINWISE_TEST_ARTIFACTS`` (default: a pytest temporary
folder) and their paths printed. No Chromium is a failure (``.ci/run`` installs it).
"""

from __future__ import annotations

import json
import os
import signal
import socket
import struct
import subprocess
import sys
import time
import urllib.request
from pathlib import Path
from typing import Any, Iterator

import pytest
import yaml

from tests.flows.browser import Browser, chromium_binary

# CartPole's random policy already scores about 20, so one iteration reaches the target.
UI_RL: dict[str, Any] = {"name": "ui", "rl": {"env_id": "CartPole-v1", "target_reward": 15, "seed": 0, "max_steps": 4000}}
SERVER_START_S = 120.0  # a busy 2-core machine; the server usually answers in 10-20 s
UI_WAIT_S = 30.0


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _wait_healthy(url: str, proc: subprocess.Popen[bytes], log: Path) -> None:
    deadline = time.monotonic() + SERVER_START_S
    while time.monotonic() < deadline:
        assert proc.poll() is None, f"prefect server exited ({proc.returncode}): {log.read_text()[-2000:]}"
        try:
            with urllib.request.urlopen(f"{url}/api/health", timeout=2) as r:
                if r.status == 200:
                    return
        except OSError:
            time.sleep(0.5)
    raise AssertionError(f"prefect server did not answer within {SERVER_START_S:.0f} s: {log.read_text()[-2000:]}")


@pytest.fixture(scope="module")
def ui_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """``prefect server start`` (API and UI, no background services) on a free port and a fresh SQLite."""
    home = tmp_path_factory.mktemp("prefect-ui-server")
    port = _free_port()
    url = f"http://127.0.0.1:{port}"
    env = {k: v for k, v in os.environ.items() if not k.startswith("PREFECT_")}
    env.update(PREFECT_HOME=str(home), PREFECT_SERVER_ANALYTICS_ENABLED="false", PREFECT_UI_API_URL=f"{url}/api",
               PREFECT_SERVER_DATABASE_CONNECTION_URL=f"sqlite+aiosqlite:///{home / 'prefect.db'}")
    log = home / "server.log"
    with log.open("wb") as out:
        proc = subprocess.Popen([sys.executable, "-m", "prefect", "server", "start", "--host", "127.0.0.1", "--port",
                                 str(port), "--no-services"], env=env, stdout=out, stderr=subprocess.STDOUT,
                                start_new_session=True)
    try:
        from flows import get_flow

        get_flow("seraph")  # import the flow (torch, gymnasium) while the server starts
        _wait_healthy(url, proc, log)
        yield url
    finally:
        os.killpg(proc.pid, signal.SIGTERM)
        try:
            proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()


@pytest.fixture(scope="module")
def ui_run(ui_server: str, tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """The seraph flow run against the UI server: its id, result and artifacts by key."""
    from prefect.client.orchestration import get_client
    from prefect.client.schemas.filters import ArtifactFilter, ArtifactFilterFlowRunId
    from prefect.concurrency.services import ConcurrencySlotAcquisitionWithLeaseService
    from prefect.settings import PREFECT_API_URL, temporary_settings

    from flows import get_flow

    config = tmp_path_factory.mktemp("ui-config") / "ui.yaml"
    config.write_text(yaml.safe_dump(UI_RL))
    # Prefect's slot-acquiring service is one per limit name and keeps the client of the server
    # it first met: drained here it starts afresh on the UI server, drained after on the next one.
    ConcurrencySlotAcquisitionWithLeaseService.drain_all(timeout=30)
    with temporary_settings(updates={PREFECT_API_URL: f"{ui_server}/api"}):
        state = get_flow("seraph")(config=str(config), return_state=True)
        assert state.is_completed(), state.message
        run_id = state.state_details.flow_run_id
        with get_client(sync_client=True) as client:
            found = client.read_artifacts(artifact_filter=ArtifactFilter(flow_run_id=ArtifactFilterFlowRunId(any_=[run_id])))
        ConcurrencySlotAcquisitionWithLeaseService.drain_all(timeout=30)
    return {"id": str(run_id), "result": state.result(), "artifacts": {a.key: a for a in found}}


@pytest.fixture(scope="module")
def shots(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = os.environ.get("TRAINWISE_TEST_ARTIFACTS")
    return Path(root) / "ui-plots" if root else tmp_path_factory.mktemp("ui-plots")


def _png_size(path: Path) -> tuple[int, int]:
    head = path.read_bytes()[:24]
    assert head[:8] == b"\x89PNG\r\n\x1a\n", path
    return struct.unpack(">II", head[16:24])


def _img_state(src: str) -> str:
    """JavaScript: [naturalWidth, naturalHeight] of the loaded <img> whose src is ``src``, else null."""
    return (f"(() => {{ const i = Array.from(document.images).find(i => i.src === {json.dumps(src)}); "
            "return i && i.complete && i.naturalWidth > 0 ? [i.naturalWidth, i.naturalHeight] : null; })()")


def _open_artifact_from_run_page(browser: Browser, base: str, run_id: str, artifact_id: str) -> None:
    """As a user does: the run's page -> its Artifacts tab -> the artifact's card."""
    tab = "Array.from(document.querySelectorAll('li.p-tab')).find(e => e.innerText.trim() === 'Artifacts')"
    card = f"document.querySelector('a[href=\"/artifacts/artifact/{artifact_id}\"]')"
    browser.goto(f"{base}/runs/flow-run/{run_id}")
    assert browser.wait_for(f"!!{tab}", UI_WAIT_S), "the flow run page shows no Artifacts tab"
    browser.evaluate(f"{tab}.click()")
    assert browser.wait_for(f"!!{card}", UI_WAIT_S), f"the Artifacts tab lists no card for artifact {artifact_id}"
    browser.evaluate(f"{card}.click()")


def test_chromium_is_installed() -> None:
    assert Path(chromium_binary()).is_file()


@pytest.mark.slow
def test_the_plot_shows_inline_in_the_ui(ui_server: str, ui_run: dict[str, Any], shots: Path,
                                        capsys: pytest.CaptureFixture[str]) -> None:
    from tasks.plots import data_uri

    plots = {Path(p).name: Path(p) for p in ui_run["result"]["plots"]}
    assert set(plots) == {"reward.png", "pareto.png"}
    artifact = ui_run["artifacts"]["ui-seraph-reward-plot"]
    assert artifact.type == "image"
    assert artifact.data == data_uri(plots["reward.png"])  # no bucket configured: the PNG itself
    report = ui_run["artifacts"]["ui-report"]

    with Browser() as browser:
        _open_artifact_from_run_page(browser, ui_server, ui_run["id"], str(artifact.id))
        shown = browser.wait_for(_img_state(artifact.data), UI_WAIT_S)
        plot_shot = browser.screenshot(shots / "ui-plot-artifact.png")
        browser.goto(f"{ui_server}/artifacts/artifact/{report.id}")
        inline = [browser.wait_for(_img_state(data_uri(p)), UI_WAIT_S) for p in plots.values()]
        report_shot = browser.screenshot(shots / "ui-report-artifact.png")
    with capsys.disabled():
        print(f"\nUI screenshots: {plot_shot} {report_shot}")

    assert shown == list(_png_size(plots["reward.png"])), f"the reward plot is not drawn; see {plot_shot}"
    assert inline == [list(_png_size(p)) for p in plots.values()], f"the report's plots are not drawn; see {report_shot}"
