"""The cluster request: its checks, what it implies, and the command line's errors it words."""

from __future__ import annotations

from pathlib import Path

import pytest

from core.request_model import RequestError
from optimizers.intunex.names import BASELINES, LIVE_BASELINES
from optimizers.intunex.request import ClusterRequest

ROOT = Path(__file__).resolve().parents[3]


def test_comma_separated_text_and_lists_are_the_same_request() -> None:
    text = ClusterRequest(instance_types="c7g.*, c7i.2xlarge", baselines="static,cachew")
    listed = ClusterRequest(instance_types=["c7g.*", "c7i.2xlarge"], baselines=["static", "cachew"])
    assert text == listed
    assert text.instance_types == ("c7g.*", "c7i.2xlarge") and text.baselines == ("static", "cachew")
    assert ClusterRequest.from_dict(text.to_dict()) == text  # the JSON edge round-trips


def test_the_baselines_default_to_all_on_the_model_and_the_live_pair_live() -> None:
    default = ClusterRequest()
    assert default.baselines_for(live=False) == BASELINES and default.baselines_for(live=True) == LIVE_BASELINES
    none = ClusterRequest(baselines="none")
    assert none.baselines == () and none.baselines_for(live=False) == () and none.baselines_for(live=True) == ()
    assert ClusterRequest(baselines="oracle").baselines_for(live=True) == ("oracle",)


@pytest.mark.parametrize(("fields", "field", "problem"), [
    ({"baselines": "static,fastest"}, "baselines", "unknown ['fastest']; allowed: static, cachew"),
    ({"instance_types": "zz.*"}, "instance_types", "'zz.*' matches no instance type; known families"),
    ({"instance_types": " , "}, "instance_types", "names no instance type"),
    ({"static_type": "c7i.big"}, "static_type", "unknown instance type 'c7i.big'; see"),
    ({"budget_usd_per_h": 0}, "budget_usd_per_h", "greater than 0"),
    ({"budget_usd_per_h": float("inf")}, "budget_usd_per_h", "finite"),
    ({"objective": "fastest"}, "objective", "'throughput-per-usd', 'least-cost' or 'max-throughput'"),
    ({"jobs": "  "}, "jobs", "must name a jobs file"),
    ({"seed": -1}, "seed", "greater than or equal to 0"),
    ({"budget": 3}, "budget", "unknown cluster request field; allowed: ['baselines', 'budget_usd_per_h'"),
])
def test_a_bad_field_is_named_with_its_problem(fields: dict, field: str, problem: str) -> None:
    with pytest.raises(RequestError) as caught:
        ClusterRequest(**fields)
    assert caught.value.field == field and problem in caught.value.problem


def test_the_types_are_the_requests_else_the_jobs_files() -> None:
    request = ClusterRequest(jobs=str(ROOT / "configs" / "cluster-demo.yaml"))
    spec = request.load_jobs()
    assert request.type_patterns(spec) == spec.pool.instance_types
    narrowed = request.model_copy(update={"instance_types": ("c7g.xlarge",)})
    assert [t.name for t in narrowed.types(spec)] == ["c7g.xlarge"]


def test_a_request_without_a_jobs_file_says_so_where_it_needs_one() -> None:
    with pytest.raises(RequestError, match="jobs: a jobs file is required"):
        ClusterRequest(jobs=None).jobs_file()


@pytest.mark.parametrize(("flags", "message"), [
    (["--simulate"], "--jobs FILE is required"),
    (["--jobs", "configs/cluster-demo.yaml", "--simulate", "--static-type", "c7i.big"], "--static-type: unknown instance type 'c7i.big'"),
    (["--jobs", "configs/cluster-demo.yaml", "--simulate", "--budget-usd-per-h", "-1"], "--budget-usd-per-h: "),
    (["--jobs", "configs/cluster-demo.yaml", "--simulate", "--instance-types", "zz.*"], "--instance-types: 'zz.*'"),
])
def test_the_command_line_names_the_flag_in_one_line_and_writes_nothing(
        tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch, flags: list[str],
        message: str) -> None:
    from trainwise.cli import main

    monkeypatch.chdir(ROOT)
    out = tmp_path / "cluster.json"
    assert main(["ingest", "cluster", *flags, "--json-out", str(out)]) == 2
    err = capsys.readouterr().err
    assert message in err and "Traceback" not in err and not out.exists()

