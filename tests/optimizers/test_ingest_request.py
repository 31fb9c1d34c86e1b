"""The ingestion request (``optimizers.ingest_request``): one model whose fields, checks and
defaults every front end shares, each front end naming a field as its user writes it; and what
the request implies (the node, the pipeline, the tuning job), made in one place for the CLI
and the flow."""

from __future__ import annotations

import logging
import typing
from pathlib import Path

import pytest

from core.errors import UserError
from core.request_model import REQUIRED
from optimizers.ingest_request import FLAG_DEFAULTS, DataSpec, Format, IngestRequest, RequestError
from optimizers.spec import IngestSpec, parse_spec


def test_the_formats_are_the_data_generators() -> None:
    from ingestion.datagen import FORMATS
    from trainwise.cli import ingest

    assert typing.get_args(Format) == FORMATS == ingest.FORMATS


def test_the_models_defaults_are_the_files_and_the_command_line_has_its_own() -> None:
    request = IngestRequest()
    assert (request.data, request.optimizer, request.time_budget_s, request.batch_size, request.on_bad_row) == (
        DataSpec(), "intune", 30.0, 4096, "error")
    assert IngestSpec.model_fields["time_budget_s"].default == 30.0
    assert FLAG_DEFAULTS == {"data": REQUIRED, "optimizer": REQUIRED, "time_budget_s": 180.0}


def test_a_folder_stands_for_its_data_spec_and_the_node_field_has_the_files_key() -> None:
    assert IngestRequest(data="/d").data == DataSpec(path="/d")
    assert IngestRequest(data={"rows": 2000, "seed": 3}).data == DataSpec(rows=2000, seed=3)
    assert IngestRequest(cpu_budget=2).vcpus == IngestRequest(vcpus=2).vcpus == 2  # by its YAML key or its name
    with pytest.raises(RequestError, match=r"^data: must name a folder of shards, got an empty path$"):
        IngestRequest(data=" ")


@pytest.mark.parametrize(("fields", "field", "problem"), [
    ({"optimizer": "magic"}, "optimizer", "unknown ingestion optimizer 'magic'"),
    ({"time_budget_s": 0}, "time_budget_s", "greater than 0"),
    ({"time_budget_s": 90_000}, "time_budget_s", "less than or equal to 86400"),
    ({"max_trials": 0}, "max_trials", "greater than or equal to 1"),
    ({"batch_size": 0}, "batch_size", "greater than or equal to 1"),
    ({"seed": -1}, "seed", "greater than or equal to 0"),
    ({"cpu_budget": 0}, "vcpus", "greater than or equal to 1"),
    ({"ram_gib": 0}, "ram_gib", "greater than 0"),
    ({"hourly_usd": -1}, "hourly_usd", "greater than or equal to 0"),
    ({"format": "csv"}, "format", "'tsv' or 'tfrecord'"),
    ({"on_bad_row": "drop"}, "on_bad_row", "'error' or 'skip'"),
    ({"baselines": ["autotune"]}, "baselines", "unknown ingestion request field"),  # the flow's, not the request's
])
def test_one_set_of_checks_each_front_end_naming_the_field_its_way(fields: dict[str, object], field: str,
                                                                   problem: str) -> None:
    from trainwise.cli.model_flags import request_from_flags

    with pytest.raises(RequestError) as info:
        IngestRequest(**fields)
    assert info.value.field == field and problem in info.value.problem
    if field != "baselines":  # the same check in a workload file, named by its key
        key = IngestRequest.renames.key(field)
        with pytest.raises(UserError, match=rf"ingestion\.{key}: .*{problem}"):
            parse_spec({"name": "w", "ingestion": fields})
        import argparse  # and on the command line, named by its flag

        with pytest.raises(UserError, match=rf"^{IngestRequest.renames.flag(field)}: "):
            request_from_flags(IngestRequest, argparse.Namespace(**{field: v for v in fields.values()}))


def test_the_command_line_defaults_apply_only_there(tmp_path: Path) -> None:
    from trainwise.cli import build_parser
    from trainwise.cli.ingest_tune import build_request

    args = build_parser().parse_args(["ingest", "tune", "--data", str(tmp_path), "--optimizer", "grid"])
    request = build_request(args)
    assert request.time_budget_s == 180.0 and request.data == DataSpec(path=str(tmp_path))
    assert request.optimizer == "grid" and request.vcpus is None and request.on_bad_row == "error"
    spec = parse_spec({"name": "w", "ingestion": {"data": str(tmp_path)}}).ingestion
    assert spec is not None and spec.time_budget_s == 30.0
    assert spec.model_dump(include=set(IngestRequest.model_fields)) == IngestRequest(data=str(tmp_path)).model_dump()


def test_bench_takes_the_requests_node_flags() -> None:
    from tests.test_code_shape import subcommand_parser
    from trainwise.cli.ingest import BENCH_REQUEST_FIELDS

    bench = subcommand_parser("ingest", "bench")
    dests = {o: a.dest for a in bench._actions for o in a.option_strings}  # type: ignore[attr-defined]
    for name in BENCH_REQUEST_FIELDS:
        assert dests[IngestRequest.renames.flag(name)] == name
    assert dests["--data"] != "data"  # bench's folder (default: the one in --config) is not the request's data


def test_the_node_is_this_machine_unless_the_request_sets_it() -> None:
    from ingestion.node import this_machine

    here = this_machine()
    assert IngestRequest().node() == here
    assert IngestRequest(hourly_usd=0.5).node().hourly_usd == 0.5
    node = IngestRequest(vcpus=1, hourly_usd=0.2).node()
    assert (node.name, node.vcpus, node.ram_gib, node.hourly_usd) == ("custom", 1, here.ram_gib, 0.2)
    assert IngestRequest(ram_gib=3.0).node().vcpus == here.vcpus


def test_the_pipeline_and_the_job_carry_the_request(tmp_path: Path) -> None:
    from ingestion import datagen
    from ingestion.dlrm import list_shards

    datagen.generate(1_000, "tfrecord", tmp_path / "d", shards=2)
    request = IngestRequest(data=str(tmp_path / "d"), batch_size=256, on_bad_row="skip", seed=7, max_trials=3,
                            time_budget_s=12, vcpus=1)
    shards, fmt = list_shards(tmp_path / "d", request.format)
    job = request.job(str(tmp_path / "d"), fmt, shards, final=None)
    assert fmt == "tfrecord" and job.spec.space.cpu_budget == 1 and list(job.spec.factory_kwargs["shards"]) == shards
    assert job.spec.factory_kwargs["batch_sizes"] == [256] and job.spec.factory_kwargs["on_bad_row"] == "skip"
    assert (job.seed, job.max_trials, job.final, job.node) == (7, 3, None, request.node())
    assert 11.0 < job.budget.remaining() <= 12.0
    spec = request.pipeline(str(tmp_path / "d"), fmt, shards, job.node)  # what verification measures: the same pipeline
    assert (spec.name, spec.space, spec.factory_kwargs) == (job.spec.name, job.spec.space, job.spec.factory_kwargs)


def test_the_flows_data_and_profile_key_follow_the_request(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The flow's tasks read the request's format, node and bad-row policy, as `ingest tune` does."""
    import tasks.ingest
    from ingestion import datagen

    monkeypatch.setattr(tasks.ingest, "get_run_logger", lambda: logging.getLogger("test"))
    datagen.generate(1_000, "tfrecord", tmp_path / "d", shards=2)
    spec = parse_spec({"name": "w", "ingestion": {"data": str(tmp_path / "d"), "cpu_budget": 1,
                                                  "on_bad_row": "skip"}}).ingestion
    assert spec is not None
    data = tasks.ingest.locate_or_generate_data.fn(spec.data, spec.format)
    assert data.format == "tfrecord" and len(data.shards) == 2  # detected, as `ingest tune` detects it
    with pytest.raises(UserError, match="no tsv shards"):
        tasks.ingest.locate_or_generate_data.fn(spec.data, "tsv")
    key = tasks.ingest.pipeline_workload_of(spec, data)
    assert key["format"] == "tfrecord" and key["node"]["vcpus"] == 1 and key["on_bad_row"] == "skip"
