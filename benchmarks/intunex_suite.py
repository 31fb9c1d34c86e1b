"""InTuneX on seeded random jobs files, against static, Cachew-style, ``intune-fixed``, greedy and the oracle.

    python -m benchmarks.intunex_suite --cases 24 --json-out benchmarks/results/intunex-random-jobs.json

Each case is a jobs file drawn from its seed (:func:`random_jobs_file`): 3-8 jobs of mixed
pipelines (read-, parse- and transform-bound, costs drawn per job) sharing one pool of 4-16 nodes
of two to four families (mixed x86 and Arm) in xlarge, 2xlarge and 4xlarge, under a tight budget
($0.5/h per pool node) or none. Case 0 is ``configs/cluster-five-jobs.yaml`` (five jobs, ten
nodes, $5/h). Per case it plans InTuneX and the baselines on the cluster model with each family's
nominal vCPU speed (``family_speed`` in the instance table) and prints throughput per dollar as
ratios over each baseline; the summary gives the worst and median plan/oracle ratio over the
cases where the oracle feeds every job, and the cases where InTuneX and greedy, or
``intune-fixed`` and static, or InTuneX and the cluster agent on AUTOTUNE's node configurations
(``intunex-autotune-nodes``: what the node level adds), differ. ``--band`` also re-plans each case at both ends of the
family speed bands (``speed_band_robust``). Every figure is simulated (the cluster model).
"""

from __future__ import annotations

import argparse
import statistics
import time
from pathlib import Path
from typing import Any

import numpy as np

from benchmarks._common import print_table, progress, recording_load, write_result
from ingestion.cluster.instances import band_speeds, by_name, select
from ingestion.cluster.jobs import load_jobs, parse_jobs
from ingestion.cluster.model import ClusterModel, Unit, from_jobs_file, synthetic_job
from optimizers.intunex.baselines import run_baselines
from optimizers.intunex.names import BASELINES
from optimizers.intunex.node_agent import NodeTable
from optimizers.intunex.planner import plan_intunex, speed_band_check
from optimizers.intunex.policies import cluster_policy

FIVE_JOBS = Path(__file__).resolve().parents[1] / "configs" / "cluster-five-jobs.yaml"
FAMILIES = ("c7i", "c6i", "c7g", "m7i", "m7g", "r7i")
KINDS = ("read", "parse", "transform")
TIGHT_USD_PER_NODE_H = 0.5
#: The cluster agent on AUTOTUNE's node configurations: what InTuneX is without its node level.
ABLATION = "intunex-autotune-nodes"


def random_jobs_file(seed: int) -> dict[str, Any]:
    """A jobs file (as its YAML mapping) drawn from ``seed``; see the module docstring."""
    rng = np.random.default_rng(seed)
    pool = int(rng.integers(4, 17))
    families = sorted(rng.choice(FAMILIES, size=int(rng.integers(2, 5)), replace=False).tolist())
    if not any(f.endswith("g") for f in families):
        families[0] = "c7g"  # mixed: always an Arm family beside x86 ones
    count = int(rng.integers(3, 9))
    capacity = pool * float(rng.uniform(0.2, 0.6))  # the jobs together need this many c7i.4xlarge nodes (AUTOTUNE)
    shares = np.exp(rng.uniform(np.log(0.4), np.log(1.6), size=count))
    reference = NodeTable(ClusterModel([], [by_name("c7i.4xlarge")], pool))
    jobs = []
    for i in range(count):
        kind, pipeline_seed = KINDS[int(rng.integers(3))], int(rng.integers(1_000_000))
        per_node = reference.rows(synthetic_job("probe", 1.0, kind, pipeline_seed), Unit(by_name("c7i.4xlarge")), "autotune")
        jobs.append({"name": f"job{i}", "demand_rows_per_s": round(per_node * capacity * shares[i] / shares.sum()),
                     "pipeline": f"{kind}-bound", "seed": pipeline_seed})
    spec: dict[str, Any] = {"pool": {"max_nodes": pool, "instance_types": [f"{f}.{s}" for f in families
                                                                           for s in ("xlarge", "2xlarge", "4xlarge")]},
                            "jobs": jobs}
    if rng.random() < 0.5:
        spec["budget_usd_per_h"] = TIGHT_USD_PER_NODE_H * pool
    return spec


def case_cluster(seed: int) -> tuple[ClusterModel, dict[str, Any]]:
    """Case ``seed``'s cluster model and a description (case 0 is the five-jobs file)."""
    spec = load_jobs(FIVE_JOBS) if seed == 0 else parse_jobs(random_jobs_file(seed), f"case {seed}")
    cluster = from_jobs_file(spec, select(spec.pool.instance_types))
    about = {"jobs_file": FIVE_JOBS.name if seed == 0 else "random", "jobs": len(spec.jobs),
             "pool": spec.pool.max_nodes, "budget_usd_per_h": spec.budget_usd_per_h,
             "families": sorted({t.family for t in cluster.types}),
             "pipelines": sorted({j.pipeline for j in spec.jobs})}
    return cluster, about


def run_case(seed: int, band: bool) -> dict[str, Any]:
    cluster, about = case_cluster(seed)
    nodes = NodeTable(cluster)
    started = time.monotonic()
    plan = plan_intunex(cluster, nodes, cluster_policy(), seed=seed)
    row: dict[str, Any] = {"seed": seed, **about, "label": "simulated", "plan_s": round(time.monotonic() - started, 2),
                           "intunex": plan.result.summary()}
    baselines = run_baselines(cluster, nodes, BASELINES)
    ablation = plan_intunex(cluster, nodes, cluster_policy(), seed=seed, node_method="autotune")
    baselines["intunex-autotune-nodes"] = ablation
    row["baselines"] = {n: b.result.summary() for n, b in baselines.items()}
    row["oracle_feasible"] = "oracle" in baselines
    for name, b in baselines.items():
        theirs = b.result.throughput_per_usd
        row[f"vs_{name}"] = plan.result.throughput_per_usd / theirs if theirs else None
        row[f"{name}_fed"] = b.result.all_fed
    if band:
        bands = {end: band_speeds(end) for end in ("low", "high")}
        row["speed_band_robust"] = speed_band_check(cluster, nodes, cluster_policy(), plan, bands, seed=seed)
    return row


def _differ(rows: list[dict[str, Any]], a: str, b: str) -> list[int]:
    """Seeds where plan ``a`` and plan ``b`` differ in cost or in whether every job is fed."""
    def get(r: dict[str, Any], name: str) -> dict[str, Any] | None:
        return r["intunex"] if name == "intunex" else r["baselines"].get(name)

    out = []
    for r in rows:
        x, y = get(r, a), get(r, b)
        if x and y and (abs(x["usd_per_h"] - y["usd_per_h"]) > 1e-9 or x["all_fed"] != y["all_fed"]):
            out.append(r["seed"])
    return out


def summarise(rows: list[dict[str, Any]]) -> dict[str, Any]:
    """Worst and median plan/oracle (cases where the oracle and the plan feed every job), medians
    over the other baselines (both fed), and the cases where the plans differ."""
    out: dict[str, Any] = {"cases": len(rows), "all_fed_cases": sum(r["intunex"]["all_fed"] for r in rows),
                           "oracle_feasible_cases": sum(r["oracle_feasible"] for r in rows)}
    for name in BASELINES + (ABLATION,):
        vals = [r[f"vs_{name}"] for r in rows if r.get(f"vs_{name}") and r["intunex"]["all_fed"] and r[f"{name}_fed"]]
        out[f"median_vs_{name}"] = round(statistics.median(vals), 4) if vals else None
        out[f"worst_vs_{name}"] = round(min(vals), 4) if vals else None
        out[f"cases_vs_{name}"] = len(vals)
    out["unfed_where_oracle_feeds"] = [r["seed"] for r in rows if r["oracle_feasible"] and not r["intunex"]["all_fed"]]
    out["intunex_differs_from_greedy"] = _differ(rows, "intunex", "greedy")
    out["intunex_beats_greedy"] = [r["seed"] for r in rows if (r.get("vs_greedy") or 0) > 1 + 1e-9 and r["intunex"]["all_fed"]]
    out["intune_fixed_differs_from_static"] = _differ(rows, "intune-fixed", "static")
    out["node_level_differs"] = _differ(rows, "intunex", ABLATION)
    out["node_level_gains"] = [r["seed"] for r in rows if (r.get(f"vs_{ABLATION}") or 0) > 1 + 1e-9 and r["intunex"]["all_fed"]]
    if any("speed_band_robust" in r for r in rows):
        bands = [r.get("speed_band_robust", {}) for r in rows]
        out["speed_band_plan_holds"] = [r["seed"] for r, b in zip(rows, bands) if b.get("robust")]
        out["speed_band_same_types"] = [r["seed"] for r, b in zip(rows, bands) if b.get("types_robust")]
    out["max_plan_s"] = max(r["plan_s"] for r in rows)
    return out


def suite(cases: int, band: bool) -> dict[str, Any]:
    rows = []
    for seed in range(cases):
        progress(f"case {seed}")
        rows.append(run_case(seed, band))
    table = [[r["seed"], r["jobs"], r["pool"], r["budget_usd_per_h"], ",".join(r["families"]), r["intunex"]["all_fed"],
              r["intunex"]["usd_per_h"]] + [r.get(f"vs_{n}") for n in BASELINES + (ABLATION,)] for r in rows]
    print_table(["case", "jobs", "pool", "budget", "families", "all fed", "$/h"]
                + [f"vs {n}" for n in BASELINES] + ["vs autotune nodes"],
                table, digits=3, title="InTuneX throughput per dollar over each baseline (simulated: cluster model)")
    summary = summarise(rows)
    print(summary)
    return {"label": "simulated", "cases": rows, "summary": summary}


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--cases", type=int, default=24, help="case 0 is the five-jobs file, the others random (default 24)")
    p.add_argument("--band", action="store_true", help="also re-plan each case at both ends of the family speed bands")
    p.add_argument("--json-out", default=None)
    args = p.parse_args(argv)
    import torch

    torch.set_num_threads(1)
    payload: dict[str, Any] = {"command": "python -m benchmarks.intunex_suite " + " ".join(argv or [])}
    with recording_load(payload):
        payload.update(suite(args.cases, args.band))
    write_result(args.json_out, payload)


if __name__ == "__main__":
    main()
