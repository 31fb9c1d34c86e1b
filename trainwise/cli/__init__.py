"""The ``trainwise`` command line.

Each command group lives in its own module (``rl``, ``ingest``, ``infra``, ``run``, ``setup``)
and exposes ``register(subparsers)``. A command's handler takes the parsed
arguments and returns its result as a dict; :func:`main` writes that dict to
``--json-out`` (atomically, with the environment) when the user asked for it.

Heavy libraries (torch, tensorflow, prefect, ray) are imported inside handlers, so
``--help`` and input errors answer at once.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any, Callable

from core.errors import UserError
from core.json_edge import JsonObject

Handler = Callable[[argparse.Namespace], "JsonObject | None"]

_GROUPS = ("rl", "ingest", "run", "setup", "infra")  # each module: register(sub)


class _Parser(argparse.ArgumentParser):
    """argparse that reports errors in our format (message + allowed values, exit 2)."""

    def error(self, message: str) -> None:  # type: ignore[override]
        self.print_usage(sys.stderr)
        self.exit(2, f"trainwise: error: {message}\n")


def finite_float(text: str) -> float:
    """argparse type: a finite number (NaN and infinity mean nothing as a reward, budget or size)."""
    import math

    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"invalid number: {text!r}") from None
    if not math.isfinite(value):
        raise argparse.ArgumentTypeError(f"must be a finite number, got {text!r}")
    return value


def add_json_out(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--json-out",
        metavar="FILE",
        type=Path,
        default=None,
        help="write the result as JSON to FILE (atomically; includes the environment)",
    )


def add_env_args(parser: argparse.ArgumentParser) -> None:
    """``--env`` (required) and ``--env-kwargs`` for a command outside the request models
    (``rl train``), with the help of the Seraph request's fields."""
    from optimizers.seraph.request import SeraphRequest

    fields = SeraphRequest.model_fields
    parser.add_argument("--env", required=True, help=fields["env_id"].description)
    parser.add_argument("--env-kwargs", default=None, metavar="JSON", help=fields["env_kwargs"].description)


def add_inject_faults(parser: argparse.ArgumentParser) -> None:
    """``--inject-faults SPEC``: make the function backend fail like Lambda (docs/faults.md)."""
    from optimizers.seraph.request import SeraphRequest

    parser.add_argument("--inject-faults", metavar="SPEC", default=None,
                        help=SeraphRequest.model_fields["faults"].description)


def parse_inject_faults(args: argparse.Namespace) -> Any:
    """The parsed ``--inject-faults`` (a ``FaultSpec``) or None; a bad spec is a UserError naming the flag."""
    from optimizers.seraph.request import RequestError, parse_faults

    try:
        return parse_faults(getattr(args, "inject_faults", None))
    except RequestError as exc:
        raise exc.named("--inject-faults") from None


def add_backend_options(p: argparse.ArgumentParser, names: tuple[str, ...]) -> None:
    """Each option of backends ``names`` as ``--<backend>-<option>`` (read by :func:`backend_options_of`)."""
    from serverless.backends import BACKENDS

    for name in names:
        for opt in BACKENDS.get(name).options:
            p.add_argument(opt.flag(name), type=opt.type, default=None, dest=_dest(name, opt.name),
                           metavar=opt.name.upper(), help=f"{name} backend only: {opt.help}")


def _dest(backend: str, option: str) -> str:
    return f"backend_option__{backend}__{option}"


def backend_options_of(args: argparse.Namespace, backend: str | None = None) -> dict[str, str | int | float | bool]:
    """The options given for the chosen backend (``backend``, else ``args.backend``); an
    option of another backend is an error."""
    from serverless.backends import BACKENDS

    backend = args.backend if backend is None else backend
    options: dict[str, str | int | float | bool] = {}
    for name in BACKENDS.names():
        for opt in BACKENDS.get(name).options:
            value = getattr(args, _dest(name, opt.name), None)
            if value is None:
                continue
            if name != backend:
                raise UserError(f"{opt.flag(name)} applies to --backend {name}, not {backend}")
            options[opt.name] = value
    return options


def build_parser() -> argparse.ArgumentParser:
    import importlib

    parser = _Parser(
        prog="trainwise",
        description="Performance-cost aware tuner for ML training infrastructure.",
    )
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", parser_class=_Parser)
    sub.required = True
    for name in _GROUPS:
        module = importlib.import_module(f"trainwise.cli.{name}")
        module.register(sub)
    return parser


def _check_json_out(path: Path | None) -> None:
    if path is None:
        return
    if path.exists() and path.is_dir():
        raise UserError(f"--json-out {path} is a directory; give a file path such as {path}/result.json")
    if (path.exists() or path.is_symlink()) and not path.is_file():
        raise UserError(f"--json-out {path} is not a regular file (a device or pipe); give a file path such as result.json")


def _write_result(path: Path, result: JsonObject) -> None:
    """``--json-out``: written atomically; when the disk refuses (full, no permission), the error
    names the path and the result goes to stdout as JSON instead, so a finished run is not lost."""
    from core.results import environment, to_json, write_json

    try:
        write_json(path, result)
    except UserError as exc:
        print(to_json({**result, "environment": environment()}))
        raise UserError(f"--json-out: {exc}; the result is on stdout instead") from None
    print(f"result written to {path}", file=sys.stderr)


def main(argv: list[str] | None = None) -> int:
    try:
        return _main(argv)
    except ModuleNotFoundError as exc:  # an engine whose extra is not installed: one line naming it
        from core.extras import missing_extra

        message = missing_extra(exc)
        if message is None:
            raise
        print(f"trainwise: error: {message}", file=sys.stderr)
        return 2


def _main(argv: list[str] | None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    handler: Handler | None = getattr(args, "handler", None)
    if handler is None:
        parser.print_help()
        return 2
    try:
        _check_json_out(getattr(args, "json_out", None))
        result = handler(args)
        json_out = getattr(args, "json_out", None)
        if json_out is not None and result is not None:
            _write_result(json_out, result)
    except UserError as exc:
        print(f"trainwise: error: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("trainwise: interrupted", file=sys.stderr)
        return 130
    return 0


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
