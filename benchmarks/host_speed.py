"""How much the host's speed moves, and how much of it the metronome correction removes.

Runs the same CartPole work over and over for ``--seconds``: one rollout of ``--batch``
steps through the real handler, then one PPO update on a fixed batch, each bracketed by
its metronome (``serverless/host_speed.py``). Reports, per kind of work:

- the spread of single measurements (std of log CPU time), raw and corrected;
- the spread of *runs*: sums over consecutive blocks of ``--block`` iterations (a
  CartPole training run is about 30 iterations), as max/min and coefficient of
  variation, raw and corrected. This is what moves a benchmark's modelled cost.

Every figure is measured CPU time on this machine (``time.thread_time``).

``--calibrate`` instead prints each metronome's median over ``--samples`` ticks on each
CPU: the reference (``host_speed.REFERENCE_MS``) is the fast state, the smallest of them.

    .venv/bin/python -m benchmarks.host_speed --seconds 240 --json-out FILE
    .venv/bin/python -m benchmarks.host_speed --calibrate
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np

from serverless import host_speed


def calibrate(samples: int) -> dict[str, dict[int, float]]:
    """Each metronome's median on each CPU this process may use (pinned in turn).

    A vCPU's speed depends on what shares its physical core on the host, and it changes:
    the same process measured 5.8 ms pinned to CPU 0 and 3.3 ms on CPU 1, and minutes
    later 3.3 ms on both. The reference is the fast, uncontended state: the smallest of
    the per-CPU medians, over a few calibrations.
    """
    import os

    cpus = sorted(os.sched_getaffinity(0))
    out: dict[str, dict[int, float]] = {kind: {} for kind in host_speed.METRONOMES}
    try:
        for cpu in cpus:
            os.sched_setaffinity(0, {cpu})
            for kind, tick in host_speed.METRONOMES.items():
                tick()  # the first call builds its state
                out[kind][cpu] = statistics.median(tick() for _ in range(samples))
    finally:
        os.sched_setaffinity(0, set(cpus))
    return out


def _spread(values: np.ndarray, block: int) -> dict[str, float]:
    blocks = np.array([values[i : i + block].sum() for i in range(0, len(values) - block + 1, block)])
    return {
        "single_std_log": float(np.log(values).std()),
        "blocks": int(len(blocks)),
        "block_max_over_min": float(blocks.max() / blocks.min()) if len(blocks) else float("nan"),
        "block_cv": float(blocks.std() / blocks.mean()) if len(blocks) else float("nan"),
    }


def probe(seconds: float, batch: int, block: int) -> dict[str, Any]:
    from serverless import envs, handler
    from serverless.ppo import PPOConfig, PPOLearner
    from serverless.presets import preset_for
    from serverless.trainer import assemble_batch, rollout_events
    from serverless.run_shape import RunShape

    spec = envs.inspect_env("CartPole-v1")
    ppo = PPOConfig.from_dict(preset_for("CartPole-v1").ppo.to_dict())
    ppo.torch_threads = 1
    learner = PPOLearner(spec=spec, config=ppo, seed=0)
    run = RunShape(actors=1, memory_mb=1769, batch=batch)
    fixed = assemble_batch([handler.handler(e) for e in rollout_events("CartPole-v1", 0, 0, learner, run)], ppo.gamma, ppo.gae_lambda)
    rows: dict[str, list[tuple[float, float]]] = {"rollout": [], "learner": []}
    end = time.monotonic() + seconds
    iteration = 0
    while time.monotonic() < end:
        events = rollout_events("CartPole-v1", 0, iteration, learner, run)
        b = host_speed.Bracket("rollout")
        b.start()
        c0 = time.thread_time()
        for e in events:
            handler.handler(e)
        cpu = time.thread_time() - c0
        b.stop()
        rows["rollout"].append((cpu, b.factor))
        b = host_speed.Bracket("learner")
        b.start()
        cpu = learner.update(fixed)["learner_cpu_s"]
        b.stop()
        rows["learner"].append((cpu, b.factor))
        iteration += 1
    report: dict[str, Any] = {"iterations": iteration, "seconds": seconds, "batch": batch, "block": block}
    for kind, pairs in rows.items():
        raw = np.array([p[0] for p in pairs])
        corrected = np.array([p[0] * p[1] for p in pairs])
        report[kind] = {
            "median_cpu_s_raw": float(np.median(raw)),
            "median_factor": float(np.median([p[1] for p in pairs])),
            "raw": _spread(raw, block),
            "corrected": _spread(corrected, block),
        }
    return report


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--seconds", type=float, default=240.0)
    ap.add_argument("--batch", type=int, default=1024)
    ap.add_argument("--block", type=int, default=30, help="iterations per simulated run")
    ap.add_argument("--calibrate", action="store_true")
    ap.add_argument("--samples", type=int, default=1000)
    ap.add_argument("--json-out", type=Path)
    args = ap.parse_args(argv)
    if args.calibrate:
        for kind, per_cpu in calibrate(args.samples).items():
            cells = ", ".join(f"CPU {cpu} {ms:.4f} ms" for cpu, ms in per_cpu.items())
            print(f"{kind}: median over {args.samples} ticks: {cells} (measured); reference now {host_speed.REFERENCE_MS[kind]} ms")
        return 0
    report = probe(args.seconds, args.batch, args.block)
    report["label"] = "measured CPU time on this machine; 'corrected' = raw x metronome factor (serverless/host_speed.py)"
    for kind in ("rollout", "learner"):
        r = report[kind]
        print(
            f"{kind}: single-measurement std(log) {r['raw']['single_std_log']:.3f} raw, {r['corrected']['single_std_log']:.3f} corrected; "
            f"{r['raw']['blocks']} runs of {args.block} iterations: max/min {r['raw']['block_max_over_min']:.2f}x raw, "
            f"{r['corrected']['block_max_over_min']:.2f}x corrected; CV {r['raw']['block_cv']:.3f} raw, {r['corrected']['block_cv']:.3f} corrected"
        )
    if args.json_out:
        from core.results import write_json

        write_json(args.json_out, report)
        print(f"wrote {args.json_out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
