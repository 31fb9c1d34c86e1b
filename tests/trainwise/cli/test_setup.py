"""`trainwise setup` (the node's measurement limit, the S3 state block) and the one-line errors of
a bad ``TRAINWISE_STATE`` or a missing optional extra (prefect-aws, Ray)."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from trainwise.cli import main


def test_setup_sets_the_nodes_measurement_slots(prefect_harness: None, monkeypatch: pytest.MonkeyPatch,
                                                tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from prefect.client.orchestration import get_client

    monkeypatch.setenv("TRAINWISE_NODE", "setup-test")
    monkeypatch.delenv("TRAINWISE_STATE", raising=False)
    out = tmp_path / "setup.json"
    assert main(["setup", "--measure-slots", "2", "--json-out", str(out)]) == 0
    result = json.loads(out.read_text())
    assert result["measure_limit"] == "trainwise-measure-setup-test" and result["results_block"] is None
    with get_client(sync_client=True) as client:
        assert client.read_global_concurrency_limit_by_name("trainwise-measure-setup-test").limit == 2
    assert "(local disk)" in capsys.readouterr().err


@pytest.mark.parametrize("slots", ["0", "65", "two"])
def test_setup_refuses_a_bad_slot_count(slots: str, capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exit_:
        main(["setup", "--measure-slots", slots])
    assert exit_.value.code == 2
    assert "must be a whole number from 1 to 64" in capsys.readouterr().err


def _one_line_error(argv: list[str], capsys: pytest.CaptureFixture[str]) -> str:
    assert main(argv) == 2
    err = capsys.readouterr().err.strip()
    assert "Traceback" not in err and len(err.splitlines()) == 1, err
    return err


def test_run_with_a_bad_state_location_fails_before_prefect(monkeypatch: pytest.MonkeyPatch, tmp_path: Path,
                                                            capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.setenv("TRAINWISE_STATE", "bucket/prefix")
    out = tmp_path / "r.json"
    err = _one_line_error(["run", "--config", "configs/demo.yaml", "--json-out", str(out)], capsys)
    assert "TRAINWISE_STATE='bucket/prefix' is not a state location" in err and not out.exists()


def test_run_with_s3_state_but_no_prefect_aws_names_the_extra(monkeypatch: pytest.MonkeyPatch,
                                                              capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.setenv("TRAINWISE_STATE", "s3://trainwise-dev-artifacts/state")
    monkeypatch.setitem(sys.modules, "prefect_aws", None)  # as if not installed
    assert "pip install 'trainwise[aws]'" in _one_line_error(["run", "--config", "configs/demo.yaml"], capsys)


def test_the_ray_backend_without_ray_names_the_extra(monkeypatch: pytest.MonkeyPatch,
                                                     capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.setitem(sys.modules, "ray", None)  # as if not installed
    err = _one_line_error(["rl", "tune", "--env", "CartPole-v1", "--target-reward", "100", "--objective", "cost",
                           "--backend", "ray", "--max-steps", "2000"], capsys)
    assert "the ray backend needs Ray: pip install 'trainwise[ray]'" in err


def test_setup_creates_the_failure_automation_once(prefect_harness: None, monkeypatch: pytest.MonkeyPatch,
                                                   tmp_path: Path) -> None:
    """After setup the server holds one automation that sends a notification through the saved
    webhook block when a run of trainwise's flows fails or crashes; setup again updates it."""
    from prefect.blocks.notifications import CustomWebhookNotificationBlock
    from prefect.client.orchestration import get_client

    from tasks.alerts import AUTOMATION_NAME, FAILED_EVENTS, FLOW_NAMES, WEBHOOK_BLOCK

    monkeypatch.setenv("TRAINWISE_NODE", "setup-alert-test")
    monkeypatch.delenv("TRAINWISE_STATE", raising=False)
    out = tmp_path / "setup.json"
    for url in ("http://127.0.0.1:9/first", "http://127.0.0.1:9/second"):
        assert main(["setup", "--notify-webhook", url, "--json-out", str(out)]) == 0
    result = json.loads(out.read_text())["failure_automation"]
    with get_client(sync_client=True) as client:
        found = client.read_automations_by_name(AUTOMATION_NAME)
    assert len(found) == 1 and str(found[0].id) == result["id"] and found[0].enabled
    trigger, (action,) = found[0].trigger, found[0].actions
    assert set(trigger.expect) == set(FAILED_EVENTS)
    related = trigger.match_related
    assert set(related["prefect.resource.name"]) == set(FLOW_NAMES)
    assert action.type == "send-notification"
    block = CustomWebhookNotificationBlock.load(WEBHOOK_BLOCK)
    assert block._block_document_id == action.block_document_id and block.url == "http://127.0.0.1:9/second"


def test_setup_refuses_a_missing_notification_block(prefect_harness: None, monkeypatch: pytest.MonkeyPatch,
                                                    capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.delenv("TRAINWISE_STATE", raising=False)
    err = _one_line_error(["setup", "--notify-block", "slack-webhook/nobody"], capsys)
    assert "no block of type 'slack-webhook' named 'nobody'" in err
    err = _one_line_error(["setup", "--notify-block", "alerts"], capsys)
    assert "--notify-block must be TYPE/NAME" in err
