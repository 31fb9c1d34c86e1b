"""Request models: what a user asks an engine for, defined once.

A request is one frozen pydantic model (:class:`RequestModel`): its fields' types, defaults,
descriptions and checks are written there and nowhere else. Every front end is generated
from it:

- the CLI's flags and their help (``trainwise.cli.model_flags``): a field ``max_steps``
  is the flag ``--max-steps``, its type the flag's type, its description the flag's help;
- the workload YAML's section (``optimizers.spec``): the model itself validates it;
- the flows' typed parameters (``flows.params``): the same model, as Prefect's run form.

A front end that names a field otherwise is written in the model's one :class:`Renames`
table (``env_id`` is ``--env`` on the command line; ``faults`` is ``--inject-faults``
there and ``inject_faults`` in YAML). Where the command line defaults a field otherwise
than the file and the flows (a longer time budget for one run at the terminal, a flag it
cannot do without), the model's :attr:`RequestModel.flag_defaults` says so, in one table
too (:data:`REQUIRED`: the flag must be given).

A failed check is a :class:`RequestError` that names the field and the problem in one
line; a front end re-labels the field as its user wrote it (:meth:`RequestError.named`).
Inside a larger model (a workload file) the checks raise pydantic's own errors, whose
location already reads ``rl.inject_faults``; :func:`problem_of` words both the same way.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable, ClassVar, Mapping, Self, TypeVar

from pydantic import BaseModel, ConfigDict, ValidationError
from pydantic.json_schema import JsonDict

from core.errors import UserError, field_name
from core.json_edge import JsonObject


T = TypeVar("T")


class Required:
    """The command-line default of a field whose flag must be given (:data:`REQUIRED`)."""

    def __repr__(self) -> str:
        return "REQUIRED"


#: In :attr:`RequestModel.flag_defaults`: the flag must be given (the model's default serves the file).
REQUIRED = Required()

#: A command-line default: a plain value, or :data:`REQUIRED`.
FlagDefault = str | int | float | bool | None | Required


class RequestError(UserError):
    """A request field the checks refused: ``field`` and what is wrong with it."""

    def __init__(self, field: str, problem: str) -> None:
        self.field = field
        self.problem = problem
        super().__init__(f"{field}: {problem}")

    def named(self, name: str) -> UserError:
        """The same error with the field called ``name`` (as the user wrote it)."""
        return UserError(f"{name}: {self.problem}")


@dataclass(frozen=True)
class Rename:
    """How the front ends name one field where they do not use its own name: ``flag`` on
    the command line (default ``--`` + the name with dashes), ``key`` in a YAML file
    (default the name)."""

    flag: str | None = None
    key: str | None = None


class Renames(dict[str, Rename]):
    """A request's renames, field -> :class:`Rename` (the one table of them)."""

    def flag(self, field: str) -> str:
        rename = self.get(field)
        return rename.flag if rename and rename.flag else "--" + field.replace("_", "-")

    def key(self, field: str) -> str:
        rename = self.get(field)
        return rename.key if rename and rename.key else field


def problem_of(error: Mapping[str, Any], allowed: list[str] | None = None) -> str:
    """One pydantic error as a one-line problem: what is wrong and, where it helps, the
    value given (``allowed``: the field names an unknown field could have been)."""
    kind, msg = error["type"], str(error["msg"]).removeprefix("Value error, ")
    if kind == "extra_forbidden":
        return "unknown field" + (f"; allowed fields here: {allowed}" if allowed else "")
    if kind == "missing":
        return "field required"
    given = error.get("input")  # a check of ours says what it got; pydantic's type checks do not
    if kind != "value_error" and "input" in error and not isinstance(given, dict) and repr(given) not in msg:
        msg += f" (got {given!r})"
    return msg


def check_with(check: Callable[..., T], *args: Any, named: str | None = None) -> T:
    """Run a library's own check (or parse) of ``args`` inside a field validator and return its
    result: its UserError becomes the field's problem (pydantic reports a ValueError), without the
    ``named: `` its message starts with (a flag, ``fault spec``): each front end names the field its
    own way."""
    try:
        return check(*args)
    except UserError as exc:
        raise ValueError(str(exc).removeprefix(f"{named}: ") if named else str(exc)) from None


def _choices_as_enums(schema: JsonDict, model: type[BaseModel]) -> None:
    """The JSON schema (a flow's run form) offers a registry's names as a drop-down, read when
    the schema is made."""
    for name, names in getattr(model, "choices", {}).items():
        field = model.model_fields.get(name)
        props = schema.get("properties")
        prop = props.get((field.alias if field else None) or name) if isinstance(props, dict) else None
        if isinstance(prop, dict):
            prop["enum"] = list(names())


class RequestModel(BaseModel):
    """The base of every request: frozen, unknown fields refused, NaN and infinity refused,
    each field settable by its own name or by its YAML key.

    A subclass sets :attr:`renames` (and ``model_config = ConfigDict(alias_generator=
    renames.key)`` so YAML keys are the aliases), :attr:`what` (how an error names the
    request), :attr:`positional` (the fields a caller may give by position),
    :attr:`choices` (the fields whose values a registry names: the flag's help and the run
    form list them) and :attr:`flag_defaults` (the command line's own default of a field,
    where it differs from the model's: the file's and the flows')."""

    model_config = ConfigDict(frozen=True, extra="forbid", allow_inf_nan=False, validate_by_name=True,
                              validate_by_alias=True, json_schema_extra=_choices_as_enums)

    renames: ClassVar[Renames] = Renames()
    what: ClassVar[str] = "request"
    positional: ClassVar[tuple[str, ...]] = ()
    choices: ClassVar[dict[str, Callable[[], tuple[str, ...]]]] = {}
    flag_defaults: ClassVar[dict[str, FlagDefault]] = {}

    def __init__(self, /, *args: Any, **data: Any) -> None:
        if len(args) > len(self.positional):
            raise TypeError(f"{type(self).__name__} takes at most {len(self.positional)} positional fields "
                            f"({', '.join(self.positional)}), got {len(args)}")
        try:
            super().__init__(**dict(zip(self.positional, args)), **data)
        except ValidationError as exc:
            raise self.error_of(exc) from None

    # Only a direct call turns the errors into one RequestError: inside a larger model (a
    # workload file) pydantic validates the fields itself and reports every error where it
    # is (``rl.objective``), as it does for a model without its own ``__init__``.
    __init__.__pydantic_base_init__ = True  # type: ignore[attr-defined]

    @classmethod
    def error_of(cls, exc: ValidationError) -> RequestError:
        """The first failed check of ``exc`` as a :class:`RequestError` on its field (by the
        field's own name, whichever name the caller set it by)."""
        error = exc.errors()[0]
        by_alias = {f.alias: name for name, f in cls.model_fields.items() if f.alias}
        loc = [by_alias.get(p, p) if i == 0 else p for i, p in enumerate(error["loc"])]
        field = ".".join(field_name(p) for p in loc) or "(request)"
        problem = problem_of(error)
        if error["type"] == "extra_forbidden":
            problem = f"unknown {cls.what} field; allowed: {sorted(cls.model_fields)}"
        return RequestError(field, problem)

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Self:
        """The request a JSON object (:meth:`to_dict`'s, a stored run's, a YAML section) describes."""
        if not isinstance(data, Mapping):
            raise RequestError("(request)", f"a {cls.what} is a JSON object of its fields, got {type(data).__name__}")
        try:
            return cls.model_validate(dict(data))
        except ValidationError as exc:
            raise cls.error_of(exc) from None

    def to_dict(self) -> JsonObject:
        """The request as a JSON object of its fields (by their own names): the JSON edge."""
        return self.model_dump(mode="json")
