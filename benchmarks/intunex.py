"""InTuneX against its baselines on simulated clusters (and, with ``--live``, a loopback tf.data service).

    python -m benchmarks.intunex --json-out benchmarks/results/intunex-sim-2026-12-02.json
    python -m benchmarks.intunex --live --json-out benchmarks/results/intunex-live-2026-12-02.json

Simulated (the default; every figure is from the cluster model, labelled simulated): pools of
4, 16 and 100 nodes with 1, 4 and 8 concurrent jobs of mixed pipelines (read-, parse- and
transform-bound, costs drawn per seed), 3 seeds. Each job's demand is drawn log-uniformly and
scaled so the jobs together need about half of what the pool's nodes could deliver. Per case it
plans InTuneX (fresh node tables, so ``plan_s`` includes both agents) and the baselines, and
prints throughput per dollar (rows delivered per dollar) as ratios: InTuneX over static, over
the Cachew-style autoscaler and over the oracle (the exact MILP over exhaustive per-node grids,
computed for cases of at most ``--oracle-max-jobs`` jobs), with every job fed, the OOM count and
the planning time.

Random jobs files (``--random-jobs N``, simulated): the five-jobs file and N-1 seeded random
jobs files against every baseline and the oracle, with the family speed bands; see
:mod:`benchmarks.intunex_suite`.

Live (``--live``, measured on this machine): see :mod:`benchmarks.intunex_live`.
"""

from __future__ import annotations

import argparse
import statistics
import time
from typing import Any

import numpy as np

from benchmarks._common import print_table, progress, recording_load, write_result
from ingestion.cluster.instances import by_name, select
from ingestion.cluster.model import ClusterModel, JobModel, ServiceOverheads, Unit, synthetic_job
from optimizers.intunex.baselines import run_baselines, static_type
from optimizers.intunex.node_agent import NodeTable
from optimizers.intunex.planner import plan_intunex
from optimizers.intunex.policies import cluster_policy

KINDS = ("read", "parse", "transform")
POOLS = (4, 16, 100)
JOB_COUNTS = (1, 4, 8)
FILL = 0.5


def make_jobs(seed: int, count: int, pool: int, table: NodeTable) -> list[JobModel]:
    """``count`` jobs of mixed pipelines whose demands together need about ``FILL`` of the pool."""
    rng = np.random.default_rng(10_000 + seed)
    ref = Unit(by_name("c7i.4xlarge"))
    jobs = []
    for i in range(count):
        job = synthetic_job(f"job{i}", 1.0, KINDS[(i + seed) % 3], 1000 * seed + i)
        share = float(np.exp(rng.uniform(np.log(0.4), np.log(1.6))))
        per_node = table.rows(job, ref, "autotune")
        jobs.append(JobModel(job.name, FILL * share * per_node * pool / count, job.pipeline, job.space_of))
    return jobs


def run_case(seed: int, pool: int, count: int, shared: dict[tuple, Any], oracle_max_jobs: int) -> dict[str, Any]:
    types = select(None)
    overheads = ServiceOverheads.load()
    probe = ClusterModel([], types, pool, overheads=overheads)
    shared_table = NodeTable(probe)
    shared_table._memo = shared  # noqa: SLF001  baselines' tables (AUTOTUNE, exhaustive) are shared across cases
    jobs = make_jobs(seed, count, pool, shared_table)
    cluster = ClusterModel(jobs, types, pool, overheads=overheads)
    shared_table.cluster = cluster
    fresh = NodeTable(cluster)  # InTuneX's own: its planning time counts both agents
    started = time.monotonic()
    plan = plan_intunex(cluster, fresh, cluster_policy(), seed=seed)
    plan_s = time.monotonic() - started
    for key, value in fresh._memo.items():  # noqa: SLF001  the node agent's choices serve greedy and intune-fixed
        shared.setdefault(key, value)
    names = ("static", "cachew", "intune-fixed", "greedy") + (("oracle",) if count <= oracle_max_jobs else ())
    baselines = run_baselines(cluster, shared_table, names)
    r = plan.result
    row: dict[str, Any] = {
        "seed": seed, "pool": pool, "jobs": count, "label": "simulated", "plan_s": round(plan_s, 2),
        "intunex": {**r.summary(), "info": {k: v for k, v in plan.info.items() if k != "weights"}},
        "baselines": {n: {**b.result.summary(), "info": b.info} for n, b in baselines.items()},
        "static_type": static_type(cluster).name,
    }
    for name, b in baselines.items():
        row[f"vs_{name}"] = r.throughput_per_usd / b.result.throughput_per_usd if b.result.throughput_per_usd else None
        row[f"{name}_fed"] = b.result.all_fed
        row[f"{name}_nodes"] = sum(b.result.nodes.values())
    return row


def summarise(rows: list[dict[str, Any]]) -> dict[str, Any]:
    """Medians of InTuneX over each baseline, over the cases where both feed every job (a plan that
    leaves a job unfed spends less and is no comparison), with how many cases that is."""
    def both_fed(name: str) -> list[float]:
        return [r[f"vs_{name}"] for r in rows
                if r.get(f"vs_{name}") is not None and r["intunex"]["all_fed"] and r.get(f"{name}_fed")]

    out: dict[str, Any] = {"cases": len(rows), "all_fed_cases": sum(r["intunex"]["all_fed"] for r in rows)}
    for name in ("static", "cachew", "intune-fixed", "greedy", "oracle"):
        vals = both_fed(name)
        out[f"median_vs_{name}"] = round(statistics.median(vals), 3) if vals else None
        out[f"min_vs_{name}"] = round(min(vals), 3) if vals else None
        out[f"cases_vs_{name}"] = len(vals)
    out["static_over_pool_cases"] = sum(r.get("static_nodes", 0) > r["pool"] for r in rows)
    out["oom_total"] = sum(r["intunex"]["oom"] for r in rows)
    out["max_plan_s"] = max(r["plan_s"] for r in rows)
    out["median_plan_s"] = round(statistics.median(r["plan_s"] for r in rows), 2)
    return out


def simulated(seeds: list[int], pools: list[int], counts: list[int], oracle_max_jobs: int) -> dict[str, Any]:
    rows = []
    for seed in seeds:
        shared: dict[tuple, Any] = {}
        for pool in pools:
            for count in counts:
                progress(f"seed {seed}: {count} job(s) on a pool of {pool} nodes")
                rows.append(run_case(seed, pool, count, shared, oracle_max_jobs))
    table = [[r["pool"], r["jobs"], r["seed"], r["intunex"]["all_fed"], r["intunex"]["usd_per_h"], r.get("vs_static"),
              r.get("vs_cachew"), r.get("vs_intune-fixed"), r.get("vs_greedy"), r.get("greedy_fed"), r.get("vs_oracle"),
              r["intunex"]["oom"], r["plan_s"]] for r in rows]
    print_table(["pool", "jobs", "seed", "all fed", "$/h", "vs static", "vs cachew", "vs intune-fixed", "vs greedy",
                 "greedy fed", "vs oracle", "OOM", "plan s"], table, digits=3,
                title="InTuneX throughput per dollar over each baseline (simulated: cluster model)")
    summary = summarise(rows)
    print(summary)
    return {"label": "simulated", "cases": rows, "summary": summary}


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    p.add_argument("--pools", type=int, nargs="+", default=list(POOLS))
    p.add_argument("--jobs", type=int, nargs="+", default=list(JOB_COUNTS))
    p.add_argument("--oracle-max-jobs", type=int, default=4, help="compute the oracle for cases of at most this many jobs")
    p.add_argument("--random-jobs", type=int, default=0, metavar="N",
                   help="the five-jobs file and N-1 random jobs files instead (benchmarks.intunex_suite, with --band)")
    p.add_argument("--live", action="store_true", help="the loopback tf.data service run instead (measured)")
    p.add_argument("--workers", type=int, default=2, help="--live: worker processes (2-4)")
    p.add_argument("--seconds", type=float, default=8.0, help="--live: measuring window per run")
    p.add_argument("--json-out", default=None)
    args = p.parse_args(argv)
    import torch

    torch.set_num_threads(1)
    payload: dict[str, Any] = {"command": "python -m benchmarks.intunex " + " ".join(argv or [])}
    with recording_load(payload):
        if args.random_jobs:
            from benchmarks.intunex_suite import suite

            payload.update(suite(args.random_jobs, band=True))
        elif args.live:
            from benchmarks.intunex_live import live

            payload.update(live(args.workers, args.seconds))
        else:
            payload.update(simulated(args.seeds, args.pools, args.jobs, args.oracle_max_jobs))
    write_result(args.json_out, payload)


if __name__ == "__main__":
    main()
