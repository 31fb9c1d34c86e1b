"""Duty-cycle CPU emulation: does a smaller local "function" really take longer?

AWS Lambda gives a function with memory M a CPU share of M/1769 vCPU. trainwise's local
backend emulates that share below one vCPU by stopping the worker process once it has
used its CPU quota for the period (:mod:`serverless.throttle`). This benchmark invokes
the *same* rollout work (same env, same number of steps, same seed, same policy weights,
a fresh env each time, so every invocation replays the identical trajectory) through the
local backend at several memory sizes, repeats it, and reports the median *measured*
handler duration at each size and its ratio to 1,769 MB.

Expected (what Lambda's CPU model predicts for a single-threaded handler):

* 442 MB   -> share 0.25  -> about 4x the 1,769 MB duration
* 885 MB   -> share 0.50  -> about 2x
* 1,769 MB -> share 1.00  -> 1x (the reference)
* 3,008 MB -> share 1.70  -> about 1x: above one vCPU the extra share only helps a
  multi-threaded handler; the rollout handler is single-threaded, so the emulator does
  not throttle it and it runs at the speed of one core, as on Lambda. On this 2-core box
  nothing faster than one core is available to a single thread anyway, so this row
  checks that the emulator neither throttles nor pretends to speed up above 1,769 MB.

Sizes are visited in a rotated order on every repeat, so drift in the machine's load
hits every size alike. Each figure is measured wall-clock time inside the worker (the
duration Lambda would bill); the emulator's *modelled* Lambda duration (CPU time divided
by the share) is reported beside it, labelled modelled.

Run under the shared lock::

    flock /tmp/trainwise-bench.lock .venv/bin/python -m benchmarks.duty_cycle --json-out duty.json
"""

from __future__ import annotations

import argparse
import base64
import sys
from pathlib import Path
from typing import Any

from benchmarks._common import median, print_table, progress, ratio, recording_load, write_result

REFERENCE_MB = 1769
DEFAULT_SIZES = (442, 885, 1769, 3008)


def policy_payload(env_id: str, seed: int) -> tuple[dict[str, Any], str]:
    """A fixed policy (seeded init) for ``env_id``: its spec dict and base64 npz weights."""
    import torch

    from serverless.envs import inspect_env
    from serverless.policy import encode_weights, export_numpy
    from serverless.torch_policy import ActorCritic

    spec = inspect_env(env_id, hidden=(64, 64))
    torch.manual_seed(seed)
    model = ActorCritic(spec)
    return spec.to_dict(), base64.b64encode(encode_weights(export_numpy(model))).decode("ascii")


def rotated(sizes: list[int], k: int) -> list[int]:
    k %= len(sizes)
    return sizes[k:] + sizes[:k]


def measure(env_id: str, steps: int, sizes: list[int], repeats: int, seed: int) -> dict[str, Any]:
    from serverless.backends.local import LocalBackend

    spec, weights = policy_payload(env_id, seed)
    next_actor = iter(range(10**9))

    def event() -> dict[str, Any]:
        # a new actor id = a fresh env reset with ``seed``: the identical trajectory every time
        return {"env_id": env_id, "num_steps": steps, "seed": seed, "policy_spec": spec,
                "actor_id": next(next_actor), "weights_npz_b64": weights}

    samples: dict[int, list[dict[str, Any]]] = {m: [] for m in sizes}
    fingerprints: set[tuple[int, float]] = set()
    load: dict[str, Any] = {}
    with LocalBackend(max_workers=1, throttle=True) as backend, recording_load(load):
        backend.invoke([event()], REFERENCE_MB, concurrency=1)  # start the worker, import: not recorded
        for rep in range(repeats):
            for memory_mb in rotated(sizes, rep):
                batch = backend.invoke([event()], memory_mb, concurrency=1)
                inv = batch.invocations[0]
                if inv.result is None:
                    raise RuntimeError(f"invocation at {memory_mb} MB failed: {inv.billing.error}")
                emu = inv.result["emulator"]
                fingerprints.add((len(inv.result["episode_returns"]), round(sum(inv.result["episode_returns"]), 6)))
                samples[memory_mb].append({
                    "measured_wall_ms": emu["measured_wall_ms"],
                    "measured_cpu_ms": emu["measured_cpu_ms"],
                    "throttled_s": emu["throttled_s"],
                    "backend_wall_s": batch.wall_s,
                    "modelled_duration_ms": inv.billing.duration_ms,
                })
            progress(f"repeat {rep + 1}/{repeats} done")

    ref = median([s["measured_wall_ms"] for s in samples[REFERENCE_MB]]) if REFERENCE_MB in samples else None
    per_size: dict[str, Any] = {}
    for memory_mb in sizes:
        rows = samples[memory_mb]
        wall = median([s["measured_wall_ms"] for s in rows])
        per_size[str(memory_mb)] = {
            "memory_mb": memory_mb,
            "cpu_share": round(memory_mb / REFERENCE_MB, 3),
            "median_measured_wall_ms": round(wall, 1),
            "median_measured_cpu_ms": round(median([s["measured_cpu_ms"] for s in rows]), 1),
            "median_throttled_s": round(median([s["throttled_s"] for s in rows]), 3),
            # CPU time over wall time: the share of a core the function actually got
            "effective_cpu_share": round(median([s["measured_cpu_ms"] / s["measured_wall_ms"] for s in rows]), 3),
            "median_modelled_duration_ms": round(median([s["modelled_duration_ms"] for s in rows]), 1),
            "ratio_vs_1769": ratio(wall, ref),
            "expected_ratio": round(REFERENCE_MB / min(memory_mb, REFERENCE_MB), 3),
            "samples": rows,
        }
    return {"per_size": per_size, "same_work": len(fingerprints) == 1,
            "work_fingerprints": sorted(fingerprints), "load": load}


def _parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--env", default="CartPole-v1", help="gymnasium env id (default CartPole-v1)")
    parser.add_argument("--steps", type=int, help="env steps per invocation (default 4000; 1000 with --quick)")
    parser.add_argument("--repeats", type=int, help="invocations per memory size (default 5; 2 with --quick)")
    parser.add_argument("--sizes", default=",".join(map(str, DEFAULT_SIZES)),
                        help=f"comma-separated memory sizes in MB, 128-10240; must include {REFERENCE_MB}")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--quick", action="store_true", help="smoke run: 1000 steps, 2 repeats")
    parser.add_argument("--json-out", type=Path, help="write the result as JSON here")
    args = parser.parse_args(argv)
    try:
        args.sizes = sorted({int(s) for s in args.sizes.split(",") if s.strip()})
    except ValueError:
        parser.error(f"--sizes: whole numbers of MB separated by commas, got {args.sizes!r}")
    if REFERENCE_MB not in args.sizes or any(not 128 <= m <= 10_240 for m in args.sizes):
        parser.error(f"--sizes must include {REFERENCE_MB} and stay within 128-10240 MB, got {args.sizes}")
    if args.steps is None:
        args.steps = 1000 if args.quick else 4000
    if args.repeats is None:
        args.repeats = 2 if args.quick else 5
    if args.steps < 1 or args.repeats < 1:
        parser.error("--steps and --repeats must be >= 1")
    return args


def main(argv: list[str] | None = None) -> int:
    args = _parse_args(argv)
    from serverless.envs import inspect_env

    inspect_env(args.env)  # a bad env id fails here, before any work (UserError)
    progress(f"{args.env}: {args.steps} steps per invocation, sizes {args.sizes}, {args.repeats} repeats")
    result = measure(args.env, args.steps, args.sizes, args.repeats, args.seed)
    rows = [[e["memory_mb"], e["cpu_share"], e["median_measured_wall_ms"], e["ratio_vs_1769"], e["expected_ratio"],
             e["median_measured_cpu_ms"], e["effective_cpu_share"], e["median_modelled_duration_ms"]]
            for e in result["per_size"].values()]
    print_table(["memory MB", "vCPU share", "measured ms (median)", "ratio vs 1769", "expected",
                 "measured CPU ms", "CPU/wall", "modelled Lambda ms"], rows, digits=2,
                title=f"Duty-cycle emulation: {args.steps} {args.env} steps per invocation, median of {args.repeats}"
                      f" (same work every time: {result['same_work']})")
    payload = {
        "benchmark": "duty_cycle",
        "env_id": args.env, "steps": args.steps, "repeats": args.repeats, "seed": args.seed,
        "reference_mb": REFERENCE_MB,
        "ratios_vs_1769": {k: v["ratio_vs_1769"] for k, v in result["per_size"].items()},
        "ratio_definition": "median measured handler wall time at a size over that at 1769 MB",
        "timing": "measured wall clock inside the local worker; modelled_* keys are the emulator's Lambda model",
        **result,
    }
    write_result(args.json_out, payload)
    return 0


if __name__ == "__main__":
    try:
        sys.exit(main())
    except Exception as exc:  # UserError from a bad env id: message, no traceback
        from core.errors import UserError

        if isinstance(exc, UserError):
            print(f"error: {exc}", file=sys.stderr)
            sys.exit(2)
        raise
