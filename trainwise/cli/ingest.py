"""`trainwise ingest` commands (placeholder: registered, not yet implemented)."""

from __future__ import annotations

import argparse


def register(sub: argparse._SubParsersAction) -> None:
    sub.add_parser("ingest", help="(not implemented yet)")
