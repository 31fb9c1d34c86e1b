"""The plots' URLs in the report's artifacts (no Prefect server): a ``data:`` URI holding
the PNG by default; with an artifacts bucket, the PNG uploaded under ``plots/<run>/`` and
a presigned URL that serves it over HTTP (moto's server); a failed upload falls back to
the embedded PNG with a warning. The browser's view is ``tests/flows/test_ui_plots.py``."""

from __future__ import annotations

import base64
import logging
import urllib.request
from pathlib import Path
from typing import Any, Iterator

import pytest

from tasks import report
from tasks.plots import PLOTS_PREFIX, data_uri, plot_key, reward_png

CURVE = [{"mean_return": 10.0 + i, "wall_s": float(i), "cost_usd": 1e-5 * i} for i in range(5)]


@pytest.fixture
def run_dir(tmp_path: Path) -> Path:
    out = tmp_path / "20260101-000000-seraph-abc123"
    reward_png(CURVE, out / "seraph" / "reward.png", target=12)
    return out


@pytest.fixture
def warnings(monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture) -> pytest.LogCaptureFixture:
    """The report's run logger, outside a run: a plain logger whose records ``caplog`` keeps."""
    monkeypatch.setattr(report, "get_run_logger", lambda: logging.getLogger("trainwise.test-report"))
    caplog.set_level(logging.WARNING, logger="trainwise.test-report")
    return caplog


def test_without_a_bucket_the_url_is_the_png_itself(run_dir: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("TRAINWISE_ARTIFACTS_BUCKET", raising=False)
    png = run_dir / "seraph" / "reward.png"
    url = report.plot_url(png, run_dir)
    assert url.startswith("data:image/png;base64,")
    assert base64.b64decode(url.split(",", 1)[1]) == png.read_bytes()


def test_report_images_become_their_urls(run_dir: Path) -> None:
    png = run_dir / "seraph" / "reward.png"
    urls = {png.resolve(): "https://example.invalid/reward.png"}
    md = report._for_artifact("see ![reward](seraph/reward.png) and ![front](seraph/pareto.png)", run_dir, urls)
    assert md == "see ![reward](https://example.invalid/reward.png) and _front (`seraph/pareto.png`, not drawn)_"


def test_plot_keys_sit_under_the_run_folder(run_dir: Path, tmp_path: Path) -> None:
    assert plot_key(run_dir / "seraph" / "reward.png", run_dir) == f"{PLOTS_PREFIX}/{run_dir.name}/seraph/reward.png"
    assert plot_key(tmp_path / "elsewhere.png", run_dir) == f"{PLOTS_PREFIX}/{run_dir.name}/elsewhere.png"
    assert report._artifact_key("cluster_demo-intunex-throughput_per_usd-plot") == "cluster-demo-intunex-throughput-per-usd-plot"


@pytest.fixture
def bucket(moto_env: str, monkeypatch: pytest.MonkeyPatch) -> Iterator[Any]:
    """An artifacts bucket on moto's server, named by ``TRAINWISE_ARTIFACTS_BUCKET``."""
    import boto3

    monkeypatch.setenv("TRAINWISE_ARTIFACTS_BUCKET", "trainwise-artifacts")
    client = boto3.client("s3")
    client.create_bucket(Bucket="trainwise-artifacts")
    yield client
    for obj in client.list_objects_v2(Bucket="trainwise-artifacts").get("Contents", []):
        client.delete_object(Bucket="trainwise-artifacts", Key=obj["Key"])
    client.delete_bucket(Bucket="trainwise-artifacts")


def test_with_a_bucket_the_url_is_presigned_and_serves_the_png(run_dir: Path, bucket: Any, warnings: Any) -> None:
    png = run_dir / "seraph" / "reward.png"
    url = report.plot_url(png, run_dir)
    key = plot_key(png, run_dir)
    assert url.startswith(f"{bucket.meta.endpoint_url}/trainwise-artifacts/{key}?")
    assert "X-Amz-Algorithm=AWS4-HMAC-SHA256" in url and "X-Amz-Expires=604800" in url  # SigV4, 7 days
    stored = bucket.get_object(Bucket="trainwise-artifacts", Key=key)
    assert stored["ContentType"] == "image/png" and stored["Body"].read() == png.read_bytes()
    with urllib.request.urlopen(url, timeout=10) as response:  # what a browser does with it
        assert response.read() == png.read_bytes()
    assert not warnings.records


def test_a_failed_upload_embeds_the_png_and_says_why(run_dir: Path, bucket: Any, warnings: Any,
                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TRAINWISE_ARTIFACTS_BUCKET", "no-such-bucket")
    png = run_dir / "seraph" / "reward.png"
    assert report.plot_url(png, run_dir) == data_uri(png)
    (record,) = warnings.records
    assert "s3://no-such-bucket/plots/" in record.getMessage() and "NoSuchBucket" in record.getMessage()
