"""InTuneX at a hundred nodes: planning time and memory as the cluster grows, and the plan against
the exact bound.

    python -m benchmarks.intunex_scale --growth --json-out benchmarks/results/intunex-scale-growth.json
    python -m benchmarks.intunex_scale --case 100,40,12 --processes 2   # one cluster, in a fresh process
    python -m benchmarks.intunex_scale --gap 48 --first-seed 5000 --json-out benchmarks/results/intunex-scale-gap.json
    python -m benchmarks.intunex_scale --merge A.json B.json --json-out gap.json   # a --gap run split over seeds

Clusters are what-if jobs files (:func:`optimizers.intunex.whatif.synthetic_spec`): mixed synthetic
pipelines on a pool of N nodes of T instance types (xlarge to 8xlarge, x86 and Graviton).

* ``--growth`` plans one cluster per size (10, 25, 50 and 100 nodes; 5-50 jobs; 4-12 types), each
  in a fresh process, and prints the planning time (node level: the per-node table; cluster level:
  the cluster agent with its moves), the peak memory the planning added (resident set size, from
  ``getrusage``), and how each grows with the table's size (log-log slope over jobs x units).
* ``--gap K`` plans K seeded clusters of 20-100 nodes (5-40 jobs, 4-12 types, drawn from each seed)
  and solves the exact bound on the planner's own table (HiGHS MILP, :mod:`optimizers.intunex.bound`):
  the median and worst gap of the plan's throughput per dollar to the bound's.
* ``--case N,J,T`` plans one cluster of the ``--growth`` kind (seed ``--seed``) in a fresh process.
* ``--processes P`` tunes the node level in P forked processes (:mod:`optimizers.intunex.node_pool`;
  the plan is the same as with one). The CPU time counts every process.

Planning and bound figures are simulated (cluster model); times and memory are measured on the
machine it runs on, with the load average recorded.
"""

from __future__ import annotations

import argparse
import math
import multiprocessing as mp
import resource
import statistics
import time
from concurrent.futures import ProcessPoolExecutor
from typing import Any

import numpy as np

from benchmarks._common import print_table, progress, recording_load, write_result

#: (nodes, jobs, types): the diagonal, then jobs and types varied at a hundred nodes.
GROWTH = ((10, 5, 4), (25, 10, 6), (50, 20, 8), (100, 40, 12), (100, 5, 12), (100, 20, 12), (100, 50, 12),
          (100, 40, 4), (100, 40, 8))


def _rss_mib() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0


def _cpu_s() -> tuple[float, float]:
    """CPU seconds of this process, and of its children that have ended (the node-level workers)."""
    own, children = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime, children.ru_utime + children.ru_stime


def plan_case(nodes: int, jobs: int, types: int, seed: int, bound: bool, processes: int = 1) -> dict[str, Any]:
    """Plan one what-if cluster (and its bound); times in seconds, memory in MiB (peak RSS added of
    this process; the node-level workers, when ``processes`` > 1, are forked copies of it)."""
    import torch

    from ingestion.cluster.instances import select
    from ingestion.cluster.model import from_jobs_file
    from optimizers.intunex.node_agent import NodeTable
    from optimizers.intunex.planner import bound_report, planning_table, plan_intunex
    from optimizers.intunex.policies import cluster_policy, node_agent
    from optimizers.intunex.whatif import synthetic_spec

    torch.set_num_threads(1)
    node_agent()
    spec = synthetic_spec(nodes, jobs, types, seed=seed)
    cluster = from_jobs_file(spec, select(spec.pool.instance_types))
    table = NodeTable(cluster, processes=processes)
    before = _rss_mib()
    started, (own, children) = time.monotonic(), _cpu_s()
    planning_table(cluster, table, "intunex", "throughput-per-usd")
    node_s = time.monotonic() - started
    plan = plan_intunex(cluster, table, cluster_policy(), seed=seed)
    total_s, (own_after, children_after) = time.monotonic() - started, _cpu_s()
    cpu_s, workers_s = own_after - own + children_after - children, children_after - children
    row = {"seed": seed, "nodes": nodes, "jobs": jobs, "types": types, "units": plan.info["units"],
           "processes": processes, "node_level_s": round(node_s, 2), "cluster_level_s": round(total_s - node_s, 2),
           "plan_s": round(total_s, 2), "plan_cpu_s": round(cpu_s, 2), "workers_cpu_s": round(workers_s, 2),
           "peak_rss_added_mib": round(_rss_mib() - before, 1),
           "all_fed": plan.result.all_fed, "usd_per_h": plan.result.usd_per_h, "plan_nodes": sum(plan.result.nodes.values()),
           "throughput_per_usd": plan.result.throughput_per_usd}
    if bound:
        report = bound_report(cluster, table, plan)
        row.update(gap_to_bound=report["gap_to_bound"], bound=report["bound"])
    return row


def isolated(nodes: int, jobs: int, types: int, seed: int, bound: bool, processes: int = 1) -> dict[str, Any]:
    """:func:`plan_case` in a fresh process, so its memory figure is its own (a pool worker that
    may fork the node-level workers itself)."""
    with ProcessPoolExecutor(1, mp_context=mp.get_context("spawn")) as pool:
        return pool.submit(plan_case, nodes, jobs, types, seed, bound, processes).result()


def slope(xs: list[float], ys: list[float]) -> float | None:
    """The log-log slope of ``ys`` over ``xs`` (how a figure grows with the table's size)."""
    pts = [(math.log(x), math.log(y)) for x, y in zip(xs, ys) if x > 0 and y > 0]
    if len(pts) < 2:
        return None
    return float(np.polyfit([p[0] for p in pts], [p[1] for p in pts], 1)[0])


def growth(seed: int, processes: int = 1) -> dict[str, Any]:
    rows = []
    for nodes, jobs, types in GROWTH:
        progress(f"{nodes} nodes x {jobs} jobs x {types} types")
        rows.append(isolated(nodes, jobs, types, seed, False, processes))
    print_table(["nodes", "jobs", "types", "units", "node level s", "cluster level s", "plan s", "plan CPU s",
                 "peak RSS +MiB", "fed"],
                [[r["nodes"], r["jobs"], r["types"], r["units"], r["node_level_s"], r["cluster_level_s"], r["plan_s"],
                  r["plan_cpu_s"],
                  r["peak_rss_added_mib"], r["all_fed"]] for r in rows],
                digits=2, title="InTuneX planning time (measured) and memory as the cluster grows (plans simulated)")
    size = [r["jobs"] * r["units"] for r in rows]
    grows = {k: slope(size, [r[k] for r in rows]) for k in ("node_level_s", "cluster_level_s", "plan_s", "plan_cpu_s",
                                                             "peak_rss_added_mib")}
    print("log-log slope over jobs x units:", {k: None if v is None else round(v, 2) for k, v in grows.items()})
    target = next(r for r in rows if (r["nodes"], r["jobs"], r["types"]) == (100, 40, 12))
    return {"cases": rows, "slope_over_jobs_x_units": grows, "plan_s_100x40x12": target["plan_s"],
            "plan_cpu_s_100x40x12": target["plan_cpu_s"]}


def gap_case(seed: int) -> tuple[int, int, int]:
    """(nodes, jobs, types) of gap case ``seed``: 20-100 nodes, 5-40 jobs (at most the nodes), 4-12 types."""
    rng = np.random.default_rng(seed)
    nodes = int(rng.integers(20, 101))
    return nodes, int(rng.integers(5, min(40, nodes) + 1)), int(rng.integers(4, 13))


def gaps(count: int, first_seed: int, partial: Any = None, processes: int = 1) -> dict[str, Any]:
    """``partial(rows)`` is called after each case (the benchmark writes what it has so far)."""
    rows: list[dict[str, Any]] = []
    for seed in range(first_seed, first_seed + count):
        nodes, jobs, types = gap_case(seed)
        progress(f"seed {seed}: {nodes} nodes x {jobs} jobs x {types} types")
        rows.append(plan_case(nodes, jobs, types, seed, True, processes))
        r = rows[-1]
        progress(f"  gap {r['gap_to_bound']}, plan {r['plan_s']} s (CPU {r['plan_cpu_s']} s), bound {r['bound']['solve_s']} s")
        if partial is not None:
            partial(rows)
    return {"cases": rows, "summary": gap_summary(rows)}


def gap_summary(rows: list[dict[str, Any]]) -> dict[str, Any]:
    """The per-case table and the median and worst gap over the cases."""
    rows = sorted(rows, key=lambda r: r["seed"])
    print_table(["seed", "nodes", "jobs", "types", "fed", "$/h", "bound $/h", "gap", "proven", "plan s", "bound s"],
                [[r["seed"], r["nodes"], r["jobs"], r["types"], r["all_fed"], r["usd_per_h"], r["bound"]["usd_per_h"],
                  r["gap_to_bound"], r["bound"]["proven_optimal"], r["plan_s"], r["bound"]["solve_s"]] for r in rows],
                digits=4, title="InTuneX plan vs the exact bound (simulated; times measured)")
    values = [r["gap_to_bound"] for r in rows if r["gap_to_bound"] is not None]
    summary = {"cases": len(rows), "seeds": [rows[0]["seed"], rows[-1]["seed"]] if rows else [],
               "with_gap": len(values), "all_fed": sum(r["all_fed"] for r in rows),
               "bound_proven": sum(r["bound"]["proven_optimal"] for r in rows),
               "median_gap": statistics.median(values) if values else None, "worst_gap": max(values) if values else None,
               "at_bound": sum(v <= 1e-9 for v in values), "max_plan_s": max(r["plan_s"] for r in rows),
               "max_plan_cpu_s": max(r["plan_cpu_s"] for r in rows)}
    print(summary)
    return summary


def merge(paths: list[str]) -> dict[str, Any]:
    """The --gap cases of several result files (finished or partial) and their summary."""
    import json

    rows: dict[int, dict[str, Any]] = {}
    for path in paths:
        doc = json.loads(open(path).read())
        for r in (doc.get("gap") or doc.get("gap_partial") or {}).get("cases", []):
            rows[r["seed"]] = r
    cases = list(rows.values())
    return {"sources": paths, "cases": sorted(cases, key=lambda r: r["seed"]), "summary": gap_summary(cases)}


def _parse_case(p: argparse.ArgumentParser, text: str) -> tuple[int, int, int]:
    """``N,J,T`` -> (nodes, jobs, types), or the parser's one-line error (exit 2)."""
    from core.errors import UserError
    from optimizers.intunex.whatif import check_size

    try:
        nodes, jobs, types = (int(v) for v in text.split(","))
        check_size(nodes, jobs, types)
    except ValueError:
        p.error(f"--case {text!r}: give N,J,T (nodes, jobs, instance types), e.g. 100,40,12")
    except UserError as e:
        p.error(f"--case {text!r}: {e}")
    return nodes, jobs, types


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--growth", action="store_true", help="planning time and memory at 10-100 nodes")
    p.add_argument("--gap", type=int, default=0, metavar="K", help="plan K seeded clusters and compare with the bound")
    p.add_argument("--first-seed", type=int, default=5000, help="first seed of --gap (default 5000)")
    p.add_argument("--seed", type=int, default=5100, help="seed of the --growth clusters (default 5100)")
    p.add_argument("--merge", nargs="+", default=None, metavar="FILE",
                   help="summarise the --gap cases of these result files together (runs split over seeds)")
    p.add_argument("--case", default=None, metavar="N,J,T",
                   help="plan one cluster of N nodes, J jobs, T types (seed --seed) in a fresh process")
    p.add_argument("--processes", type=int, default=1, metavar="P",
                   help="node-level tunings in P forked processes (default 1: in the planning process)")
    p.add_argument("--json-out", default=None)
    args = p.parse_args(argv)
    if args.merge:
        write_result(args.json_out, {"command": "python -m benchmarks.intunex_scale " + " ".join(argv or []),
                                     "label": "simulated plans; measured times", "gap": merge(args.merge)})
        return
    if not args.growth and not args.gap and not args.case:
        p.error("give --growth, --gap K, --case N,J,T or --merge FILE...")
    if args.processes < 1:
        p.error(f"--processes must be >= 1, got {args.processes}")
    case = _parse_case(p, args.case) if args.case else None
    payload: dict[str, Any] = {"command": "python -m benchmarks.intunex_scale " + " ".join(argv or []),
                               "label": "simulated plans; measured times and memory"}
    with recording_load(payload):
        if case:
            payload["case"] = isolated(*case, args.seed, False, args.processes)
            print({k: v for k, v in payload["case"].items() if k != "throughput_per_usd"})
        if args.growth:
            payload["growth"] = growth(args.seed, args.processes)
        if args.gap:
            def partial(rows: list[dict[str, Any]]) -> None:
                write_result(args.json_out, {**payload, "gap_partial": {"cases": rows}})

            payload["gap"] = gaps(args.gap, args.first_seed, partial, args.processes)
    write_result(args.json_out, payload)


if __name__ == "__main__":
    import sys

    main(sys.argv[1:])
