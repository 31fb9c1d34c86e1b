"""`trainwise ingest node-speed`: measure this node's per-vCPU DLRM stage rates for its instance type.

    trainwise ingest node-speed --instance-type c7g.xlarge

Writes ``ingestion/cluster/data/node_speed/<TYPE>.json`` (or ``--out-dir``); see
``ingestion.cluster.node_speed``. ``--instance-type local`` records this machine as the live
loop's local node.
"""

from __future__ import annotations

import argparse
from pathlib import Path


def register_node_speed(isub: argparse._SubParsersAction) -> None:
    n = isub.add_parser("node-speed", help="measure this node's per-vCPU stage rates and record them for its instance type")
    n.add_argument("--instance-type", required=True, help="the EC2 type this machine is (e.g. c7g.xlarge), or 'local'")
    n.add_argument("--seconds", type=float, default=1.0, help="measuring window per pipeline prefix (default 1)")
    n.add_argument("--repeats", type=int, default=3, help="windows per prefix; the median counts (default 3)")
    n.add_argument("--out-dir", type=Path, default=None, help="where the record goes (default: the instance table's node_speed/)")
    n.set_defaults(handler=node_speed_handler)


def node_speed_handler(args: argparse.Namespace) -> int:
    from ingestion.cluster.instances import SPEEDS
    from ingestion.cluster.node_speed import family_of, measure, record

    family_of(args.instance_type)  # an unknown type fails before anything is measured
    doc = measure(args.instance_type, args.seconds, args.repeats)
    path = record(doc, args.out_dir or SPEEDS)
    stages = ", ".join(f"{s} {r:,.0f}" for s, r in doc["stage_rows_per_s"].items())
    print(f"{doc['instance_type']} ({doc['machine']}): {doc['rows_per_s_per_vcpu']:,.0f} rows/s per vCPU "
          f"(measured); per stage rows/s: {stages}")
    print(f"recorded in {path}")
    return 0
