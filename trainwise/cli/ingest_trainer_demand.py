"""`trainwise ingest trainer-demand`: the rows/s a training job's trainer consumes (its demand, measured).

    trainwise ingest trainer-demand --trainer dlrm --json-out demand.json
    trainwise ingest trainer-demand --trainer mypkg.train:make_step --batch-size 2048 --verify

Runs the trainer (the built-in DLRM-style one, or the user's ``module:function`` factory of a step
function) on synthetic in-memory batches of the DLRM schema and prints its demand alone: the rows/s
above which it is never input-bound, times ``1 + --margin`` (``ingestion.cluster.trainer``).
``--verify`` also paces batches at 0.7x-1.2x the compute rate (re-measured just before each point,
since a shared machine's speed drifts) and reports the share of step time the trainer waits for
input at each, and the lowest rate from which that share stays under 5%.
"""

from __future__ import annotations

import argparse
import sys
from typing import Any, NotRequired, TypedDict

from core.errors import UserError
from core.json_edge import JsonObject

#: Paced rates for --verify, as fractions of the trainer's compute rate.
VERIFY_FRACTIONS = (0.7, 0.85, 0.9, 0.95, 1.0, 1.05, 1.1, 1.2)
WAIT_BAR = 0.05


class PacedPoint(TypedDict):
    """Batches paced at ``fraction`` of the compute rate (re-measured just before): the input-wait share."""

    fraction: float
    compute_rows_per_s: float
    rows_per_s: float
    input_wait_share: float


class DemandCheck(TypedDict):
    """``--verify``: the sweep, and from which rate on the trainer waits for input less than ``wait_bar``."""

    sweep: list[PacedPoint]
    wait_bar: float
    fed_from_fraction: float | None
    fed_from_rows_per_s: NotRequired[float]
    demand_over_fed_from: NotRequired[float]


def register_trainer_demand(isub: argparse._SubParsersAction) -> None:
    from trainwise.cli import add_json_out, finite_float

    t = isub.add_parser("trainer-demand", help="measure the rows/s a trainer consumes (a job's demand)",
                        description="Run the trainer on synthetic in-memory batches and print the rows/s at which it "
                        "stops being input-bound, with a safety margin: the demand to give its job.")
    t.add_argument("--trainer", default="dlrm", help="dlrm (built in) or module:function, a factory that returns a "
                   "step function taking one batch (dict of NumPy arrays: dense, cat, label); default dlrm")
    t.add_argument("--batch-size", type=int, default=1024, help="rows per batch (default 1024, as the dlrm pipelines)")
    t.add_argument("--seconds", type=finite_float, default=3.0, help="measuring window (default 3)")
    t.add_argument("--repeats", type=int, default=3, help="windows; the median counts, their spread is reported (default 3)")
    t.add_argument("--margin", type=finite_float, default=0.05, help="safety margin over the measured rate (default 0.05)")
    t.add_argument("--verify", action="store_true",
                   help="also measure the input-wait share with batches paced at rates around the figure")
    add_json_out(t)
    t.set_defaults(handler=trainer_demand_handler)


def _verify(args: argparse.Namespace, step: Any, demand: Any) -> DemandCheck:
    """Pace batches at fractions of the compute rate, re-measured just before each point (a shared
    machine's speed drifts between points), and measure the input-wait share at each."""
    from ingestion.cluster.trainer import measure_demand, wait_share_at

    sweep: list[PacedPoint] = []
    for f in VERIFY_FRACTIONS:
        local = measure_demand(args.trainer, batch_size=args.batch_size, seconds=args.seconds / 2, repeats=2,
                               warmup_steps=1, margin=0.0, step=step).compute_rows_per_s
        share = wait_share_at(step, f * local, batch_size=args.batch_size, seconds=args.seconds, name=args.trainer)
        sweep.append({"fraction": f, "compute_rows_per_s": local, "rows_per_s": f * local, "input_wait_share": share})
        print(f"  paced at {f:.2f}x the compute rate ({f * local:,.0f} rows/s): input wait {share:.1%}", file=sys.stderr)
    # the lowest fraction from which the wait share stays under the bar at every higher fraction of the sweep
    under = [p["fraction"] for i, p in enumerate(sweep) if all(q["input_wait_share"] < WAIT_BAR for q in sweep[i:])]
    out: DemandCheck = {"sweep": sweep, "wait_bar": WAIT_BAR, "fed_from_fraction": min(under) if under else None}
    if under:
        fed_from = out["fed_from_rows_per_s"] = min(under) * demand.compute_rows_per_s
        over = out["demand_over_fed_from"] = demand.demand_rows_per_s / fed_from
        print(f"  input wait under {WAIT_BAR:.0%} from {min(under):.2f}x the compute rate on "
              f"({fed_from:,.0f} rows/s); the demand is {over:.2f}x that (measured)", file=sys.stderr)
    return out


def trainer_demand_handler(args: argparse.Namespace) -> JsonObject:
    from ingestion.cluster.trainer import load_trainer, measure_demand

    if args.batch_size < 1 or args.seconds <= 0 or args.repeats < 2 or not 0 <= args.margin <= 1:
        raise UserError(f"--batch-size must be >= 1, --seconds > 0, --repeats >= 2 and --margin 0-1; got "
                        f"{args.batch_size}, {args.seconds:g}, {args.repeats}, {args.margin:g}")
    step = load_trainer(args.trainer)
    demand = measure_demand(args.trainer, batch_size=args.batch_size, seconds=args.seconds, repeats=args.repeats,
                            margin=args.margin, step=step)
    result: JsonObject = demand.to_json()
    if args.verify:
        result["verify"] = _verify(args, step, demand)
    print(f"{args.trainer}: {demand.compute_rows_per_s:,.0f} rows/s computing (spread {demand.spread:.1%} over "
          f"{len(demand.windows_rows_per_s)} windows), demand with a {demand.margin:.0%} margin (measured):", file=sys.stderr)
    print(f"{demand.demand_rows_per_s:.0f}")
    return result
