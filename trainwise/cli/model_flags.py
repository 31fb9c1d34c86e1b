"""A request model's command-line flags, generated from the model (``core.request_model``).

Each field of the model is one flag: the field ``max_steps`` is ``--max-steps`` (or the
flag in the model's ``renames`` table, ``env_id`` -> ``--env``); its type is the flag's type
(a number is a finite number, a whole number an ``int``, a yes/no field a switch: ``--x``
when it defaults to off, ``--no-x`` when it defaults to on, anything else the text the
model parses); its description is the flag's help, with the choices (a registry's names,
or a ``Literal``'s values) and the default added; a field without a default is a required
flag. A flag not given is left out, so the model's own default applies: the defaults, like
the checks, live in the model, and so does the command line's own default of a field where
it differs (the model's ``flag_defaults``: a value the flag takes when not given, or
``REQUIRED``).

:func:`request_from_flags` builds the request; a failed check names the flag.
"""

from __future__ import annotations

import argparse
import types
import typing
from typing import Any, Callable, Mapping, TypeVar

from pydantic.fields import FieldInfo

from core.request_model import REQUIRED, RequestError, RequestModel
from trainwise.cli import finite_float

M = TypeVar("M", bound=RequestModel)


def _kind(field: FieldInfo) -> Any:
    """The field's annotation, ``None`` taken out of an optional one (``str`` for any other union)."""
    annotation = field.annotation
    if typing.get_origin(annotation) in (typing.Union, types.UnionType):
        kinds = [a for a in typing.get_args(annotation) if a is not type(None)]
        annotation = kinds[0] if len(kinds) == 1 else str
    return annotation


def flag_type(field: FieldInfo) -> Callable[[str], Any] | type[bool]:
    """What a flag of ``field`` takes: ``bool`` (a switch), ``int``, ``finite_float``, or ``str``
    (text the model parses: a name, one of a ``Literal``'s values, JSON, a spec)."""
    annotation = _kind(field)
    if annotation is bool:
        return bool
    if annotation is int:
        return int
    if annotation is float:
        return finite_float
    return str


def flags_of(model: type[RequestModel], skip: tuple[str, ...] = (), only: tuple[str, ...] | None = None) -> dict[str, str]:
    """Field -> flag, for every field of ``model`` (or ``only`` those) but ``skip``."""
    return {name: model.renames.flag(name) for name in model.model_fields
            if name not in skip and (only is None or name in only)}


def _help(model: type[RequestModel], name: str, field: FieldInfo) -> str:
    text = field.description or name.replace("_", " ")
    kind, choices = _kind(field), model.choices.get(name)
    names = choices() if choices is not None else typing.get_args(kind) if typing.get_origin(kind) is typing.Literal else ()
    if names:
        text += f": {' | '.join(map(str, names))}"
    default = model.flag_defaults.get(name, field.default)
    if isinstance(default, (str, int, float)) and not isinstance(default, bool):
        text += f" (default {default})"
    return text.replace("%", "%%")


def add_request_flags(parser: argparse.ArgumentParser, model: type[RequestModel], skip: tuple[str, ...] = (),
                      only: tuple[str, ...] | None = None) -> None:
    """One flag per field of ``model`` (or ``only`` those) but ``skip``, each read back by
    :func:`request_from_flags`; a flag of the model's ``flag_defaults`` takes that default
    when not given (or must be given: ``REQUIRED``)."""
    for name, flag in flags_of(model, skip, only).items():
        field = model.model_fields[name]
        kind, help_text = flag_type(field), _help(model, name, field)
        own = model.flag_defaults.get(name, argparse.SUPPRESS)
        if kind is bool:
            action = "store_false" if field.default is True else "store_true"
            parser.add_argument(flag, action=action, dest=name, default=argparse.SUPPRESS, help=help_text)
        else:
            parser.add_argument(flag, type=kind, dest=name, default=argparse.SUPPRESS if own is REQUIRED else own,
                                required=field.is_required() or own is REQUIRED,
                                metavar=flag.removeprefix("--").replace("-", "_").upper(), help=help_text)


def request_from_flags(model: type[M], args: argparse.Namespace, names: Mapping[str, str] | None = None,
                       **values: Any) -> M:
    """The request the given flags (and ``values``, fields set otherwise) ask for, checked;
    a failed check is a UserError naming the flag (``names``: the flag of a field set by
    ``values``)."""
    given = {name: getattr(args, name) for name in model.model_fields if hasattr(args, name)}
    try:
        return model(**given, **values)
    except RequestError as exc:
        raise exc.named((names or {}).get(exc.field) or model.renames.flag(exc.field)) from None
