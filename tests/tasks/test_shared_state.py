"""Shared state on S3 (``TRAINWISE_STATE=s3://BUCKET/PREFIX``) against moto's server on loopback:
a second "machine" (a fresh ``TRAINWISE_HOME``) reuses the first one's profiles from the bucket,
both Prefect's cached task results (through prefect-aws's ``S3Bucket``) and trainwise's own
profile files; with the local default a fresh home starts cold."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import boto3
import pytest
import requests

from core import state
from core.errors import UserError

BUCKET = "trainwise-dev-artifacts"
PREFIX = "team/state"


@pytest.fixture
def bucket(moto_env: str, monkeypatch: pytest.MonkeyPatch) -> Any:
    """An empty bucket on moto, the AWS variables pointing at it, and S3 state on in it."""
    requests.post(f"{moto_env}/moto-api/reset", timeout=10)
    s3 = boto3.client("s3", region_name="us-east-1")
    s3.create_bucket(Bucket=BUCKET)
    monkeypatch.setenv(state.ENV, f"s3://{BUCKET}/{PREFIX}")
    return s3


def _machine(monkeypatch: pytest.MonkeyPatch, root: Path, name: str) -> Path:
    """A fresh home and runs folder: another machine as far as trainwise's local state goes."""
    monkeypatch.setenv("TRAINWISE_HOME", str(root / name / "home"))
    monkeypatch.setenv("TRAINWISE_RUNS", str(root / name / "runs"))
    return root / name


def _keys(s3: Any, under: str) -> list[str]:
    return [o["Key"] for o in s3.list_objects_v2(Bucket=BUCKET, Prefix=f"{PREFIX}/{under}").get("Contents", [])]


JOBS = "pool: {max_nodes: 4}\njobs:\n  - {name: tiny, demand_rows_per_s: 300000, pipeline: parse-bound, seed: 5}\n"


def test_a_fresh_home_reuses_prefect_cached_profiles_from_the_bucket(
    bucket: Any, prefect_harness: None, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    from flows.intunex import intunex
    from optimizers.intunex.request import ClusterRequest

    jobs = tmp_path / "jobs.yaml"
    jobs.write_text(JOBS)
    _machine(monkeypatch, tmp_path, "first")
    first = intunex(ClusterRequest(jobs=str(jobs), instance_types="c7g.xlarge"))
    assert first["profile_cache"] == {"intunex": False}
    assert _keys(bucket, "prefect-results/"), "the cached result went to the bucket"

    _machine(monkeypatch, tmp_path, "second")
    second = intunex(ClusterRequest(jobs=str(jobs), instance_types="c7g.xlarge"))
    assert second["profile_cache"] == {"intunex": True}
    assert not (tmp_path / "second" / "home" / "prefect-results").exists()

    monkeypatch.delenv(state.ENV)  # the control: local state, another fresh home, the same server
    _machine(monkeypatch, tmp_path, "third")
    third = intunex(ClusterRequest(jobs=str(jobs), instance_types="c7g.xlarge"))
    assert third["profile_cache"] == {"intunex": False}


def test_a_fresh_home_plans_from_the_first_homes_seraph_profile_without_a_pilot(
    bucket: Any, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    from optimizers.seraph.pilot import workload_for
    from optimizers.seraph.workload_profile import load_profile, save_profile
    from tests.optimizers.seraph.test_steps import _synthetic_profile
    from trainwise.cli import main

    workload = workload_for("CartPole-v1", None)
    _machine(monkeypatch, tmp_path, "first")
    saved = save_profile(_synthetic_profile(workload))
    assert _keys(bucket, "profiles/") == [f"{PREFIX}/profiles/{saved.name}"]

    second = _machine(monkeypatch, tmp_path, "second")
    out = second / "plan.json"
    rc = main(["rl", "tune", "--env", "CartPole-v1", "--target-reward", "475", "--objective", "cost", "--plan-only", "--backend", "local",
               "--json-out", str(out)])
    assert rc == 0
    assert json.loads(out.read_text())["profile"]["reused"] is True  # no pilot ran on the second machine

    monkeypatch.delenv(state.ENV)  # the control: with local state a fresh home has no profile
    _machine(monkeypatch, tmp_path, "third")
    assert load_profile(workload.key_dict(), "local") is None


def test_only_the_shared_kinds_go_to_the_bucket(bucket: Any, monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    home = _machine(monkeypatch, tmp_path, "first") / "home"
    for kind in ("profiles", "agents", "data", "checkpoints"):
        (home / kind).mkdir(parents=True)
        (home / kind / "x.json").write_text("{}")
        state.push(home / kind / "x.json")
    state.push(tmp_path / "elsewhere.json")  # not under the home: never shared
    assert sorted(_keys(bucket, "")) == [f"{PREFIX}/agents/x.json", f"{PREFIX}/profiles/x.json"]
    fresh = _machine(monkeypatch, tmp_path, "second") / "home"
    assert state.pull(fresh / "agents" / "x.json") and (fresh / "agents" / "x.json").read_text() == "{}"
    assert not state.pull(fresh / "profiles" / "absent.json")
    assert not state.pull(fresh / "data" / "x.json")


@pytest.mark.parametrize("value", ["s3://", "s3:/b", "https://bucket/x", "s3://UPPER/x", "/tmp/state"])
def test_a_bad_state_location_is_one_line_naming_what_is_allowed(value: str, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(state.ENV, value)
    with pytest.raises(UserError, match=r"TRAINWISE_STATE=.*allowed: unset or 'local'.*s3://BUCKET\[/PREFIX\]"):
        state.s3_state()


def test_s3_state_without_prefect_aws_says_which_extra_to_install(monkeypatch: pytest.MonkeyPatch) -> None:
    import sys

    from tasks.caching import result_storage

    monkeypatch.setenv(state.ENV, f"s3://{BUCKET}/{PREFIX}")
    monkeypatch.setitem(sys.modules, "prefect_aws", None)  # as if not installed
    with pytest.raises(UserError, match=r"needs prefect-aws: pip install 'trainwise\[aws\]'"):
        result_storage()
    monkeypatch.delenv(state.ENV)
    assert Path(result_storage()).name == "prefect-results"
