"""Errors that mean "the user asked for something we cannot do".

The CLI turns a :class:`UserError` into a one-paragraph message on stderr and exit
code 2, never a traceback. Library code raises it (or a subclass) for bad input:
an unknown env id, a memory size outside Lambda's range, a missing data directory.
The message must name what is wrong and what is allowed.
"""

from __future__ import annotations


class UserError(Exception):
    """Bad input from a user: shown as a clear message, not a traceback."""


def field_name(part: object) -> str:
    """A field or key name for a one-line message: as written, or quoted if it would not read
    as one (empty, surrounding spaces, a newline or other unprintable characters)."""
    text = str(part)
    return text if text and text.isprintable() and text.strip() == text else repr(text)
