"""`trainwise rl tune` (Seraph): placeholder, owned by the Seraph work."""

from __future__ import annotations

import argparse


def register(rl_sub: argparse._SubParsersAction) -> None:
    rl_sub.add_parser("tune", help="(not implemented yet)")
