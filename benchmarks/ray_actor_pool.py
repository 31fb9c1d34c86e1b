"""Rollout placement on Ray: the backend's ``ray.util.ActorPool`` beside the hand-made pool it replaced.

The hand-made pool sent each rollout event to actor ``actor_id % actors``, so an env slot stayed
on the actor that holds it warm (``serverless.handler``). ``ray.util.ActorPool`` gives each event
to the next free actor: correct either way (a slot new to an actor is rebuilt by replaying its
episode), but a moved slot would cost a replay and count as that actor's cold work. This runs the
same short CartPole training (one seed, the same events) through both, in one process, one
after the other per repeat, and prints per placement: the slots replayed, the cold starts, the
rollout (Lambda-clock) seconds per iteration (measured), and whether the learning was identical.

    flock /tmp/trainwise-bench.lock python -m benchmarks.ray_actor_pool --iterations 6 --repeats 2 --functions 4
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
from pathlib import Path
from typing import Any

from benchmarks._common import machine_state
from serverless.run_shape import RunShape


def _sticky_backend() -> Any:
    """The Ray backend with its placement replaced by the hand-made pool it had before
    ``ray.util.ActorPool``: event ``i`` to actor ``actor_id % actors``, all submitted at once,
    the replies taken in order (everything else, the actors, weights by reference and billing,
    unchanged)."""
    from serverless.backends.ray_backend import RayBackend

    class StickyRayBackend(RayBackend):
        def _run_pooled(self, actors: list[Any], events: list[dict[str, Any]]) -> tuple[list[dict[str, Any]], list[int]]:
            placed = [int(e.get("actor_id", i)) % len(actors) for i, e in enumerate(events)]
            refs = [self._submit(actors[a], e) for a, e in zip(placed, events)]
            replies = []
            for ref, a in zip(refs, placed):
                try:
                    replies.append(self._ray.get(ref))
                except Exception as exc:  # noqa: BLE001 - as the backend reports it
                    replies.append({"ok": False, "error": f"{type(exc).__name__}: {exc}"})
            return replies, placed

    return StickyRayBackend()


def _run(placement: str, iterations: int, seed: int, functions: int) -> dict[str, Any]:
    from serverless.backends.ray_backend import RayBackend
    from serverless.handler import reset_warm_state
    from serverless.ppo import PPOConfig
    from serverless.trainer import TrainSpec, train

    reset_warm_state()
    spec = TrainSpec(env_id="CartPole-v1", target_reward=10_000, max_steps=iterations * 512,
                     run=RunShape(actors=functions, memory_mb=1769, batch=512),
                     ppo=PPOConfig(epochs=2, minibatch_size=128, steps_per_env=32), seed=seed, backend="ray",
                     checkpoint_every=0, checkpoint_dir=Path(tempfile.mkdtemp(prefix="bench-ray-pool-")))
    backend = _sticky_backend() if placement == "sticky" else RayBackend()
    try:
        result = train(spec, backend=backend, progress=False)
    finally:
        backend.close()
    its = result.iterations[1:]  # the first iteration is cold for both
    return {
        "replayed_slots": sum(r.rollout.get("replayed_slots", 0) for r in its),
        "cold_starts": sum(r.rollout["cold_starts"] for r in its),
        "rollout_s": statistics.median(r.lambda_s for r in its),
        "learning": [(r.episodes, r.mean_return) for r in result.iterations],
    }


def main(argv: list[str] | None = None) -> int:
    import ray

    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--iterations", type=int, default=8)
    p.add_argument("--repeats", type=int, default=2)
    p.add_argument("--seed", type=int, default=3)
    p.add_argument("--functions", type=int, default=4,
                   help="concurrent rollout functions asked for; Ray runs them on 2 actors (2 CPUs)")
    args = p.parse_args(argv)
    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False)
    before = machine_state()
    runs: dict[str, list[dict[str, Any]]] = {"sticky": [], "actor-pool": []}
    try:
        for _ in range(args.repeats):
            for placement in runs:  # interleaved
                runs[placement].append(_run(placement, args.iterations, args.seed, args.functions))
    finally:
        ray.shutdown()
    sticky_s = statistics.median(r["rollout_s"] for r in runs["sticky"])
    print(f"machine before: {before}; after: {machine_state()}")
    print("placement    replayed slots  cold starts  rollout s/iteration (measured, median)  ratio  same learning")
    for name, rs in runs.items():
        s = statistics.median(r["rollout_s"] for r in rs)
        same = all(r["learning"] == runs["sticky"][0]["learning"] for r in rs)
        print(f"{name:<12} {statistics.median(r['replayed_slots'] for r in rs):>14} "
              f"{statistics.median(r['cold_starts'] for r in rs):>12} {s:>38.3f}  {s / sticky_s:5.2f}  {same}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
