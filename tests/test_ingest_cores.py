"""benchmarks.ingestion_cores: configuration syntax (the timing itself is not unit-tested)."""

from __future__ import annotations

from benchmarks.ingestion_cores import parse_config


def test_parse_config_overrides_and_prefix():
    assert parse_config("") == ({}, None)
    assert parse_config("parse_parallelism=1:prefetch_buffer=4") == ({"parse_parallelism": 1, "prefetch_buffer": 4}, None)
    assert parse_config("upto=parse:transform_parallelism=2") == ({"transform_parallelism": 2}, "parse")
