"""`trainwise setup`: prepare a Prefect server for a team's runs.

- the node's measurement limit, ``trainwise-measure-<node>`` (``tasks.measure``), with
  ``--measure-slots`` slots (default 1: one measurement at a time on this node, across flow runs);
- with ``TRAINWISE_STATE=s3://BUCKET/PREFIX`` (``core.state``), the prefect-aws ``S3Bucket`` block
  Prefect's cached results go to, saved on the server (``tasks.caching.state_block``);
- with ``--notify-webhook URL`` or ``--notify-block TYPE/NAME``, the automation that notifies when
  a flow run of trainwise's flows fails or crashes (``tasks.alerts``).

Run it once per node against the server the flows use (``PREFECT_API_URL``); the flows also
create a missing limit on first use, and ``trainwise serve`` creates it before serving.
"""

from __future__ import annotations

import argparse
import sys
from typing import Any
from core.json_edge import JsonObject



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
    notify = setup.add_mutually_exclusive_group()
    notify.add_argument("--notify-webhook", metavar="URL", default=None,
                        help="notify this webhook (POST, JSON {\"text\": ...}) when a flow run fails or crashes")
    notify.add_argument("--notify-block", metavar="TYPE/NAME", default=None,
                        help="notify through this saved notification block (e.g. slack-webhook/alerts) when a flow "
                        "run fails or crashes")
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


def setup_handler(args: argparse.Namespace) -> JsonObject:
    from core import state
    from trainwise.cli.run import prefect_environment

    s3 = state.s3_state()  # a bad TRAINWISE_STATE fails before Prefect starts
    with prefect_environment():  # the Prefect server (PREFECT_API_URL, or the embedded one)
        from tasks.caching import state_block
        from tasks.measure import set_measure_limit

        block = state_block(s3) if s3 else None
        limit = set_measure_limit(args.measure_slots)
        alert = _failure_automation(args)
    print(f"measurement limit: {limit} ({args.measure_slots} slot(s))", file=sys.stderr)
    print(f"state: {state.describe()}" + (f"; Prefect results block {block}" if block else ""), file=sys.stderr)
    if alert is None:
        print("failure notifications: not set up (give --notify-webhook URL or --notify-block TYPE/NAME)", file=sys.stderr)
    else:
        print(f"failure notifications: automation {alert.name} sends to {alert.block}", file=sys.stderr)
    return {"measure_limit": limit, "measure_slots": args.measure_slots, "state": state.describe(), "results_block": block,
            "failure_automation": None if alert is None else {"id": str(alert.id), "name": alert.name, "block": alert.block}}


def _failure_automation(args: argparse.Namespace) -> Any:
    """The failure automation for the target given, or None when none is given."""
    from tasks.alerts import ensure_failure_automation, named_block, webhook_block

    if args.notify_webhook:
        return ensure_failure_automation(*webhook_block(args.notify_webhook))
    if args.notify_block:
        return ensure_failure_automation(*named_block(args.notify_block))
    return None
