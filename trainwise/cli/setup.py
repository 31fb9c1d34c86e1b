"""`trainwise setup`: prepare a Prefect server for a team's runs.

- the node's measurement limit, ``trainwise-measure-<node>`` (``tasks.measure``), with
  ``--measure-slots`` slots (default 1: one measurement at a time on this node, across flow runs);
- with ``TRAINWISE_STATE=s3://BUCKET/PREFIX`` (``core.state``), the prefect-aws ``S3Bucket`` block
  Prefect's cached results go to, saved on the server (``tasks.caching.state_block``).

Run it once per node against the server the flows use (``PREFECT_API_URL``); the flows also
create a missing limit on first use, and ``trainwise serve`` creates it before serving.
"""

from __future__ import annotations

import argparse
import sys
from typing import Any



def register(sub: argparse._SubParsersAction) -> None:
    from trainwise.cli import add_json_out

    setup = sub.add_parser(
        "setup",
        help="create this node's measurement limit (and the S3 state block) on the Prefect server",
        description="Create or update this node's global concurrency limit for measurements and, with "
        "TRAINWISE_STATE=s3://BUCKET/PREFIX, save the S3Bucket block for Prefect's cached results.",
    )
    setup.add_argument("--measure-slots", type=_slots, default=1,
                       help="measurements this node runs at once, across flow runs (default 1)")
    add_json_out(setup)
    setup.set_defaults(handler=setup_handler)


def _slots(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"must be a whole number from 1 to 64, got {text!r}") from None
    if not 1 <= value <= 64:
        raise argparse.ArgumentTypeError(f"must be a whole number from 1 to 64, got {text!r}")
    return value


def setup_handler(args: argparse.Namespace) -> dict[str, Any]:
    from core import state
    from trainwise.cli.run import prefect_environment

    s3 = state.s3_state()  # a bad TRAINWISE_STATE fails before Prefect starts
    with prefect_environment():  # the Prefect server (PREFECT_API_URL, or the embedded one)
        from tasks.caching import state_block
        from tasks.measure import set_measure_limit

        block = state_block(s3) if s3 else None
        limit = set_measure_limit(args.measure_slots)
    print(f"measurement limit: {limit} ({args.measure_slots} slot(s))", file=sys.stderr)
    print(f"state: {state.describe()}" + (f"; Prefect results block {block}" if block else ""), file=sys.stderr)
    return {"measure_limit": limit, "measure_slots": args.measure_slots, "state": state.describe(), "results_block": block}
