"""`trainwise rl sweep`: one job trained over many seeds, each seed's run decided from the job's history.

    trainwise rl sweep --env Acrobot-v1 --target-reward -100 --seeds 0-9 \\
        [--objective cost|speed|balanced] [--concurrency K] --json-out FILE

The JSON holds ``runs`` (per seed: ``seed``, ``arm``, ``reached``, ``env_steps``, ``cost_usd``,
``lambda_time_s``, ``configs``) and ``total`` (``cost_usd``: everything the sweep paid, pilots and
probes included; ``wall_s``). Costs and times on the local emulator are modelled (labelled).
"""

from __future__ import annotations

import argparse
import sys

from core.json_edge import JsonObject
from trainwise.cli.rl_tune import add_request_args, build_request


def register(rl_sub: argparse._SubParsersAction) -> None:
    from trainwise.cli import add_json_out

    p = rl_sub.add_parser("sweep", help="train one job over many seeds, each seed's configuration chosen from the "
                          "job's run history (a conservative bandit); reports every seed and the sweep's whole bill",
                          description=__doc__.split("\n\n")[0])
    add_request_args(p)
    p.add_argument("--seeds", required=True, help="the seeds: '0-9', '0,1,2' or '0-3,7'")
    p.add_argument("--concurrency", type=int, default=1, help="seeds trained at once (default 1)")
    p.add_argument("--no-progress", action="store_true", help="no progress bar")
    add_json_out(p)
    p.set_defaults(handler=handle)


def handle(args: argparse.Namespace) -> JsonObject:
    from core.errors import UserError
    from optimizers.seraph.sweep import parse_seeds, sweep

    seeds = parse_seeds(args.seeds)
    if args.concurrency < 1:
        raise UserError(f"--concurrency must be >= 1, got {args.concurrency}")
    request = build_request(args)
    result = sweep(request, seeds, concurrency=args.concurrency, progress=not args.no_progress).to_dict()
    for r in result["runs"]:
        print(f"seed {r['seed']}: {r['arm']}, reached={r['reached']} in {r['env_steps']} env steps, "
              f"${r['cost_usd']:.6f}, {r['lambda_time_s']:.1f} s", file=sys.stderr)
    t = result["total"]
    print(f"sweep: {t['reached']}/{t['seeds']} seeds reached the target; total ${t['cost_usd']:.6f} "
          f"({result['label']}); measured wall {t['wall_s']:.1f} s", file=sys.stderr)
    return result
