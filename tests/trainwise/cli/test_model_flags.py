"""Flags generated from a request model: names, types, defaults and errors come from the model."""

from __future__ import annotations

import argparse
from typing import ClassVar, Literal

import pytest
from pydantic import Field, field_validator

from core.errors import UserError
from core.request_model import REQUIRED, FlagDefault, Rename, Renames, RequestModel
from trainwise.cli.model_flags import add_request_flags, flags_of, request_from_flags


class Toy(RequestModel):
    renames: ClassVar[Renames] = Renames(name=Rename(flag="--who"), loud=Rename(flag="--no-loud"))
    what: ClassVar[str] = "toy request"

    name: str = Field(description="who it is")
    count: int = Field(3, description="how many")
    ratio: float | None = Field(None, description="a share")
    loud: bool = Field(True, description="shout")
    quiet: bool = Field(False, description="whisper")

    @field_validator("count")
    @classmethod
    def _some(cls, v: int) -> int:
        if v < 1:
            raise ValueError(f"must be >= 1, got {v}")
        return v


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(exit_on_error=False)
    add_request_flags(parser, Toy)
    return parser


def test_each_field_is_one_flag_named_by_the_rename_table() -> None:
    assert flags_of(Toy) == {"name": "--who", "count": "--count", "ratio": "--ratio", "loud": "--no-loud", "quiet": "--quiet"}
    options = {o for a in _parser()._actions for o in a.option_strings} - {"-h", "--help"}
    assert options == set(flags_of(Toy).values())


def test_flags_not_given_take_the_models_defaults() -> None:
    toy = request_from_flags(Toy, _parser().parse_args(["--who", "ann"]))
    assert toy == Toy(name="ann") and toy.count == 3 and toy.loud is True and toy.ratio is None


def test_types_and_switches_follow_the_fields() -> None:
    args = _parser().parse_args(["--who", "bo", "--count", "5", "--ratio", "0.25", "--no-loud", "--quiet"])
    assert request_from_flags(Toy, args) == Toy(name="bo", count=5, ratio=0.25, loud=False, quiet=True)
    with pytest.raises(argparse.ArgumentError, match="invalid int value"):
        _parser().parse_args(["--who", "x", "--count", "2.5"])
    with pytest.raises(argparse.ArgumentError, match="finite"):
        _parser().parse_args(["--who", "x", "--ratio", "nan"])


def test_a_field_without_default_is_a_required_flag() -> None:
    with pytest.raises(SystemExit):  # argparse reports a missing required flag and exits
        _parser().parse_args([])


def test_a_failed_check_names_the_flag_and_help_comes_from_the_description() -> None:
    with pytest.raises(UserError, match=r"^--count: must be >= 1, got 0$"):
        request_from_flags(Toy, _parser().parse_args(["--who", "x", "--count", "0"]))
    helps = {a.dest: a.help for a in _parser()._actions}
    assert helps["count"] == "how many (default 3)" and helps["name"] == "who it is"


def test_building_the_cli_loads_no_engine() -> None:
    """The request models the flags come from are light: ``trainwise --help`` and an input
    error answer without numpy, scipy, gymnasium, torch or TensorFlow loaded."""
    import subprocess
    import sys

    code = ("import sys; from trainwise.cli import build_parser; build_parser(); "
            "print(sorted(m for m in ('numpy', 'scipy', 'gymnasium', 'torch', 'tensorflow') if m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=120)
    assert out.stdout.strip() == "[]", out.stdout


class Budgeted(RequestModel):
    """A request whose command line defaults two fields otherwise than the file."""

    flag_defaults: ClassVar[dict[str, FlagDefault]] = {"where": REQUIRED, "budget": 180.0}

    where: str = Field("here", description="where it runs")
    budget: float = Field(30.0, description="seconds")
    mode: Literal["fast", "slow"] = Field("fast", description="how")


def test_the_command_lines_own_defaults_apply_there_only() -> None:
    parser = argparse.ArgumentParser(exit_on_error=False)
    add_request_flags(parser, Budgeted)
    with pytest.raises(SystemExit):  # REQUIRED: the flag must be given on the command line
        parser.parse_args([])
    request = request_from_flags(Budgeted, parser.parse_args(["--where", "there"]))
    assert (request.where, request.budget, request.mode) == ("there", 180.0, "fast")  # the flag's default
    assert Budgeted() == Budgeted(where="here", budget=30.0)  # the model's, everywhere else
    helps = {a.dest: a.help for a in parser._actions}
    assert helps["budget"] == "seconds (default 180.0)" and helps["where"] == "where it runs"
    assert helps["mode"] == "how: fast | slow (default fast)"  # a Literal's values are its choices
    with pytest.raises(UserError, match=r"^--mode: Input should be 'fast' or 'slow' \(got 'medium'\)$"):
        request_from_flags(Budgeted, parser.parse_args(["--where", "x", "--mode", "medium"]))
