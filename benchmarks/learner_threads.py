"""The PPO update's wall-time speed-up at two (or more) threads, per env and update engine.

What the pilot measures for the learner's machine (:mod:`optimizers.seraph.learner_threads`),
with more repeats: per env, the learner's real update (the preset's network and PPO
settings) at the pilot's batch, one epoch, one thread against each thread count this host
offers, interleaved, the median of the ratios. A speed-up under 1.0 means the extra
threads slow the update down; the plan then keeps one thread.

    .venv/bin/python -m benchmarks.learner_threads --envs CartPole-v1,Acrobot-v1,Pendulum-v1 \\
        --repeats 7 [--engines numpy,torch] [--json-out FILE]
"""

from __future__ import annotations

import argparse
from dataclasses import replace
from typing import Any

from benchmarks._common import print_table, recording_load, write_result


def measure(env_id: str, engine: str, repeats: int) -> dict[str, Any]:
    """One env's speed-ups under ``engine`` at its pilot batch."""
    from optimizers.seraph.learner_threads import measure_thread_scaling
    from optimizers.seraph.pilot import pilot_batch, workload_for

    workload = workload_for(env_id, None)
    workload = replace(workload, ppo={**workload.ppo, "update_engine": engine})
    timing = measure_thread_scaling(workload, pilot_batch(workload), modelled=False, repeats=repeats)
    return {"env": env_id, "engine": engine, "batch": timing.batch,
            "threads_speedup": dict(timing.scaling.speedups), "label": timing.scaling.label}


def main(argv: list[str] | None = None) -> dict[str, Any]:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--envs", default="CartPole-v1,Acrobot-v1,Pendulum-v1")
    p.add_argument("--engines", default="numpy")
    p.add_argument("--repeats", type=int, default=7)
    p.add_argument("--json-out", default=None)
    args = p.parse_args(argv)
    out: dict[str, Any] = {"label": "measured, wall time, speed-up against one thread"}
    with recording_load(out):
        rows = [measure(env, engine, args.repeats) for env in args.envs.split(",") for engine in args.engines.split(",")]
    out["rows"] = rows
    counts = sorted({t for r in rows for t in r["threads_speedup"]} - {1})
    print_table(["env", "engine", "batch", *(f"{t} threads" for t in counts)],
                [[r["env"], r["engine"], r["batch"], *(r["threads_speedup"].get(t) for t in counts)] for r in rows],
                title=f"update speed-up against one thread (measured, wall; load {out['load_before']['loadavg_1m']} "
                      f"-> {out['load_after']['loadavg_1m']})", digits=2)
    write_result(args.json_out, out)
    return out


if __name__ == "__main__":
    main()
