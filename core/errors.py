"""Errors that mean "the user asked for something we cannot do".

The CLI turns a :class:`UserError` into a one-paragraph message on stderr and exit
code 2, never a traceback. Library code raises it (or a subclass) for bad input:
an unknown env id, a memory size outside Lambda's range, a missing data directory.
The message must name what is wrong and what is allowed.
"""

from __future__ import annotations


class UserError(Exception):
    """Bad input from a user: shown as a clear message, not a traceback."""
