"""`trainwise infra` commands (placeholder: registered, not yet implemented)."""

from __future__ import annotations

import argparse


def register(sub: argparse._SubParsersAction) -> None:
    sub.add_parser("infra", help="(not implemented yet)")
