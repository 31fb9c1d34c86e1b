"""Pre-train the cluster-level policy on random planning tables.

    python -m optimizers.intunex.pretrain --episodes 3000

Each batch draws a problem: 1-8 jobs, the default instance types with their real prices, per job
a per-vCPU rate (log-uniform), a RAM need per vCPU that rules out small-RAM units for some jobs,
a network cap per unit, a demand of 0.3-12 whole 16-vCPU nodes, and a pool from tight (1.1x the
biggest nodes it needs) to ample (3x). The rows each unit delivers
are the vCPUs times the rate with a diminishing return for large units (a pipeline's serial part).
The weights are written as JSON (no pickle).
"""

from __future__ import annotations

import argparse
import json

import numpy as np

from ingestion.cluster.instances import select
from optimizers.intunex.cluster_agent import LinearPolicy, Problem, reinforce
from optimizers.intunex.policies import CLUSTER_POLICY

FRACTIONS = (1.0, 0.5, 0.25)


def random_problem(rng: np.random.Generator) -> Problem:
    types = select(None)
    units = [(i, f) for i, t in enumerate(types) for f in FRACTIONS if t.vcpus * f >= 4]
    jobs = int(rng.integers(1, 9))
    rate = np.exp(rng.uniform(np.log(2e4), np.log(2e5), size=jobs))
    ram_need = rng.choice([0.0, 1.0, 2.5, 5.0], size=jobs, p=[0.5, 0.25, 0.15, 0.1])
    serial = rng.uniform(0.0, 0.03, size=jobs)
    rows = np.zeros((jobs, len(units)))
    for u, (i, f) in enumerate(units):
        t = types[i]
        v = t.vcpus * f
        x = rate * v / (1.0 + serial * v)
        x = np.minimum(x, t.network_gbps * f * 1e9 * 0.8 / 8 / 320)
        rows[:, u] = np.where(ram_need <= t.ram_gib / t.vcpus, x, 0.0)
    demand = rate * 16 * np.exp(rng.uniform(np.log(0.3), np.log(12.0), size=jobs))
    # a pool from tight (about what the biggest nodes need) to ample
    whole = [u for u, (_, f) in enumerate(units) if f == 1.0]
    needed = float(np.sum(demand / np.maximum(rows[:, whole].max(axis=1), 1e-9)))
    max_nodes = int(np.ceil(needed * rng.uniform(1.1, 3.0))) + int(rng.integers(0, 2))
    return Problem(rows, demand, np.array([i for i, _ in units]), np.array([f for _, f in units]),
                   np.array([t.usd_per_hour for t in types]), max_nodes=max_nodes,
                   unit_vcpus=np.array([types[i].vcpus for i, _ in units], dtype=float))


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--episodes", type=int, default=3000)
    p.add_argument("--seed", type=int, default=0)
    args = p.parse_args(argv)
    policy = LinearPolicy()
    info = reinforce(policy, random_problem, np.random.default_rng(args.seed), episodes=args.episodes)
    policy.info = {"trained_on": "random planning tables (optimizers.intunex.pretrain)", "seed": args.seed, **info}
    policy.save(CLUSTER_POLICY)
    print(json.dumps(policy.to_json()))


if __name__ == "__main__":
    main()
