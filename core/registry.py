"""Named registries: one per seam (function backends, ingestion optimizers, ...).

A registry maps a name to an entry, usually a frozen dataclass that declares what the
thing is and how to build it. Everything that lists names (CLI choices, spec
validation, benchmarks) reads the registry, so adding an entry is one registration::

    BACKENDS = Registry[BackendEntry]("function backend")
    BACKENDS.register("local", BackendEntry(name="local", ...))
    BACKENDS.get("local")      # the entry
    BACKENDS.names()           # ("local",) in registration order

Looking up an unknown name raises :class:`core.errors.UserError` naming the kind of
thing and the allowed names. The message names no CLI flag or YAML field: a caller
that knows where the name came from prefixes it (``rl.backend: unknown ...``) with
:func:`where`.
"""

from __future__ import annotations

from typing import Generic, Iterator, TypeVar

from core.errors import UserError

T = TypeVar("T")


class Registry(Generic[T]):
    """Entries of one kind, by name, in registration order."""

    def __init__(self, kind: str) -> None:
        self.kind = kind
        self._entries: dict[str, T] = {}

    def register(self, name: str, entry: T) -> T:
        """Add ``entry`` under ``name``; a name already taken is a programming error."""
        if not isinstance(name, str) or not name:
            raise ValueError(f"a {self.kind} needs a non-empty name, got {name!r}")
        declared = getattr(entry, "name", name)
        if declared != name:
            raise ValueError(f"{self.kind} registered as {name!r} declares the name {declared!r}")
        if name in self._entries:
            raise ValueError(f"{self.kind} {name!r} is already registered")
        self._entries[name] = entry
        return entry

    def unregister(self, name: str) -> None:
        """Remove ``name`` (tests that register a plug-in clean up with this)."""
        self.get(name)
        del self._entries[name]

    def get(self, name: str) -> T:
        try:
            return self._entries[name]
        except (KeyError, TypeError):
            raise UserError(self.unknown(name)) from None

    def unknown(self, name: object) -> str:
        """The message for a name that is not registered."""
        return f"unknown {self.kind} {name!r}; allowed: {', '.join(self._entries) or '(none registered)'}"

    def names(self) -> tuple[str, ...]:
        return tuple(self._entries)

    def entries(self) -> tuple[T, ...]:
        return tuple(self._entries.values())

    def __contains__(self, name: object) -> bool:
        return isinstance(name, str) and name in self._entries

    def __iter__(self) -> Iterator[str]:
        return iter(tuple(self._entries))

    def __len__(self) -> int:
        return len(self._entries)

    def __repr__(self) -> str:
        return f"Registry({self.kind!r}: {', '.join(self._entries)})"


def where(location: str, error: UserError) -> UserError:
    """``error`` with the place the bad name came from in front: ``rl.backend: unknown ...``."""
    return UserError(f"{location}: {error}")
