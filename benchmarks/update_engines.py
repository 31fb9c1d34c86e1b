"""The learner's two update engines side by side: env steps to the target and update time.

The numpy engine (``PPOConfig.update_engine = "numpy"``, the default) computes torch's PPO
update to float32 rounding, not bit for bit, so a fixed seed follows another trajectory under
each engine. This benchmark runs ``trainwise rl train``'s configuration (the env's preset) for
each seed under both engines, one after another in one process, and reports per seed the env
steps to the target (measured) and the mean update time per iteration (measured), and over the
seeds the medians and a rank-sum test of the env steps (do the engines learn alike?).
``--hidden``/``--activation`` set another network (``rl train``'s flags); the row names the
engine that ran (a network the numpy engine does not support runs on torch under both).

    .venv/bin/python -m benchmarks.update_engines --env CartPole-v1 --target-reward 475 \\
        --seeds 1,2,3,4,5,6,7,8,9,10 --json-out benchmarks/results/update-engines-cartpole-DATE.json
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
from dataclasses import replace
from pathlib import Path
from typing import Any

from benchmarks._common import print_table, progress, recording_load, write_result
from serverless.network import NetworkSpec

ENGINES = ("numpy", "torch")


def run_one(env_id: str, target: float, seed: int, engine: str, max_steps: int | None,
            network: NetworkSpec | None = None) -> dict[str, Any]:
    """One training run at the env's preset (and ``network``, if given) under ``engine``: env
    steps, reached, update seconds, and the engine that ran."""
    from serverless.ppo import choose_engine
    from serverless.presets import preset_for
    from serverless.trainer import TrainSpec, train

    preset = preset_for(env_id)
    ppo = replace(preset.ppo, update_engine=engine, network=network or preset.ppo.network)
    with tempfile.TemporaryDirectory() as ckpt:
        spec = TrainSpec(
            env_id=env_id, target_reward=target, max_steps=max_steps or preset.max_steps,
            run=preset.run,
            ppo=ppo, seed=seed, checkpoint_every=0, checkpoint_dir=Path(ckpt),
        )
        result = train(spec, progress=False).to_dict()
    updates = [float(it["learner_s"]) for it in result["iterations"]]
    return {
        "seed": seed, "engine": engine, "engine_ran": choose_engine(ppo)[0], "network": ppo.network.to_dict(),
        "reached": bool(result["reached"]), "env_steps": int(result["env_steps"]),
        "final_mean_return": result.get("final_mean_return"),
        "update_s_mean": statistics.fmean(updates) if updates else None, "iterations": len(updates),
    }


def summarise(rows: list[dict[str, Any]]) -> dict[str, Any]:
    """Medians per engine, the per-seed pairs and a two-sided rank-sum test of the env steps."""
    from optimizers.seraph.stats import rank_sum_p

    by = {e: [r for r in rows if r["engine"] == e] for e in ENGINES}
    steps = {e: [r["env_steps"] for r in by[e]] for e in ENGINES}
    out: dict[str, Any] = {
        e: {"reached": sum(r["reached"] for r in by[e]), "runs": len(by[e]),
            "env_steps_median": statistics.median(steps[e]),
            "update_s_median": statistics.median(r["update_s_mean"] for r in by[e])}
        for e in ENGINES
    }
    out["update_speedup"] = out["torch"]["update_s_median"] / out["numpy"]["update_s_median"]
    out["env_steps_rank_sum_p"] = rank_sum_p(steps["numpy"], steps["torch"])
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--env", default="CartPole-v1")
    ap.add_argument("--target-reward", type=float, default=475.0)
    ap.add_argument("--seeds", default="1,2,3,4,5,6,7,8,9,10")
    ap.add_argument("--max-steps", type=int, default=None, help="default: the env's preset")
    ap.add_argument("--hidden", default=None, help="the network's widths, e.g. 128,64 (default: the preset's)")
    ap.add_argument("--activation", default=None, help="the network's activation (default: the preset's)")
    ap.add_argument("--json-out", type=Path, default=None)
    args = ap.parse_args(argv)
    seeds = [int(s) for s in args.seeds.split(",") if s.strip()]
    from serverless.presets import preset_for

    network = preset_for(args.env).ppo.network.with_text(args.hidden, args.activation)
    rows: list[dict[str, Any]] = []
    load: dict[str, Any] = {}
    with recording_load(load):
        for seed in seeds:
            for engine in ENGINES:
                progress(f"{args.env} seed {seed}: {engine}")
                rows.append(run_one(args.env, args.target_reward, seed, engine, args.max_steps, network))
    summary = summarise(rows)
    print_table(
        ["seed", "engine", "ran on", "reached", "env steps", "update s/iter"],
        [[r["seed"], r["engine"], r["engine_ran"], r["reached"], f"{r['env_steps']:,}", f"{r['update_s_mean']:.3f}"]
         for r in rows],
    )
    for e in ENGINES:
        s = summary[e]
        print(f"{e}: reached {s['reached']}/{s['runs']}, median env steps {s['env_steps_median']:,.0f}, "
              f"median update {s['update_s_median']:.3f} s/iteration")
    print(f"update speed-up (torch / numpy): {summary['update_speedup']:.2f}x; "
          f"env steps rank-sum p = {summary['env_steps_rank_sum_p']:.3f} (measured)")
    if args.json_out:
        write_result(args.json_out, {"benchmark": "update_engines", "env": args.env, "target_reward": args.target_reward,
                                     "network": network.to_dict(), "label": "measured", "runs": rows, "summary": summary,
                                     "load": load})
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
