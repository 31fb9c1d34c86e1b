"""Would a smaller batch pay, and can the run's first iterations tell? Side by side, per env.

Seraph keeps the static default's batch on an env without reference runs. This benchmark
measures what that leaves on the table and whether any statistic of the first iterations at
the static default (2 functions of 1,769 MB, one env each) predicts it:

* **the sweep**: full training runs to the target at the static default's layout with the
  batch at 4,000 (the default) and smaller, the same seeds for each: env steps (measured),
  time and cost (modelled: the emulator's Lambda clock and the price table), and each batch's
  median over the default's;
* **the early statistics** at batch 4,000, over the first ``--probe-iterations`` iterations
  of each seed: the update's approx KL and clip fraction, the value function's explained
  variance, and a held-out test of the update itself. The batch is split into its two envs'
  segments; a PPO update on one half alone (the same epochs, minibatch and learning rate, from
  the same parameters and optimiser state) is scored on the other half by its first-order
  policy gain, ``mean((π_new/π_old − 1)·Â) / std(Â)`` (the surrogate TRPO and PPO maximise,
  Kakade and Langford 2002), both ways round; ``R`` is twice that held-out gain over the full
  update's in-sample gain: two half-batch iterations against one full one, the full update
  favoured (it is scored on its own data). ``R`` above one predicts that halving the batch
  gains progress per env step;
* and the batch gradient's noise-to-signal ratio ``ν = Σ var_env / (N · Σ signal)`` from the
  online layout decision's probe (:mod:`serverless.layout_probe`), pooled over the iterations:
  McCandlish et al.'s ``B_noise / B``, which predicts that halving the batch saves env steps
  while it is small.

The held-out updates run on a copy of the learner's state, which is restored before the
iteration's own update, so the training itself is the static default's.

    .venv/bin/python -m benchmarks.seraph_batch_evidence \\
        --envs Acrobot-v1,benchmarks.beacon_env:Beacon-v0,CartPole-v1,Pendulum-v1,LunarLander-v3 \\
        --seeds 0,1,2 --json-out benchmarks/results/seraph-batch-evidence-DATE.json
"""

from __future__ import annotations

import argparse
import copy
import statistics
from contextlib import contextmanager
from dataclasses import replace
from typing import Any, Iterator

import numpy as np

from benchmarks._common import print_table, progress, recording_load, write_result
from benchmarks.seraph import TARGETS, envs_and_seeds
from optimizers.rl_baselines.static import STATIC_DEFAULT

#: the static default's batch first: the others are compared with it
DEFAULT_BATCHES = (STATIC_DEFAULT.batch, STATIC_DEFAULT.batch // 2, STATIC_DEFAULT.batch // 4)
#: what a PPO update reads of a batch
_UPDATE_KEYS = ("obs", "actions", "logprobs", "values", "advantages", "returns")


def policy_gain(learner: Any, data: dict[str, np.ndarray]) -> float:
    """The first-order policy gain of the learner's current parameters on ``data`` (collected
    under the parameters that gave ``data["logprobs"]``), in units of the advantages' spread."""
    import torch

    from serverless.ppo import _as_tensors

    with torch.no_grad():
        t = _as_tensors(data)
        logp, _, _ = learner.model.evaluate(t["obs"], t["actions"], with_entropy=False)
        ratio = torch.exp(logp - t["logprobs"]).numpy()
    adv = data["advantages"]
    return float(np.mean((ratio - 1.0) * adv) / (np.std(adv) + 1e-8))


def held_out_gain(learner: Any, update: Any, batch: dict[str, np.ndarray]) -> dict[str, float]:
    """The mean policy gain of an update on one half of ``batch`` scored on the other half, both
    ways round (``half_out``). The halves are the batch's first and second halves: at the static
    default's layout, its two envs' segments. The learner is left as it was found; the batch's
    own update is not run here."""
    from serverless.ppo import learner_arrays

    half = len(batch["obs"]) // 2
    halves = [{k: batch[k][:half] for k in _UPDATE_KEYS}, {k: batch[k][half:] for k in _UPDATE_KEYS}]
    scored = [learner_arrays(h, learner.spec.action_kind) for h in halves]
    saved = copy.deepcopy(learner.state_dict())
    gains = []
    for train_on, score_on in ((0, 1), (1, 0)):
        update(learner, halves[train_on])
        gains.append(policy_gain(learner, scored[score_on]))
        learner.load_state_dict(copy.deepcopy(saved))
    return {"half_out": float(np.mean(gains))}


@contextmanager
def instrumented_updates(log: list[dict[str, float]]) -> Iterator[None]:
    """While open, every PPO update first runs :func:`held_out_gain` and then itself, and
    appends the held-out gain and its own in-sample gain to ``log``."""
    from serverless import ppo
    from serverless.ppo import learner_arrays

    original = ppo.PPOLearner.update

    def update(self: Any, batch: dict[str, np.ndarray], probe_noise: bool = False) -> dict[str, Any]:
        row = held_out_gain(self, original, batch)
        stats = original(self, batch, probe_noise)
        row["full_in"] = policy_gain(self, learner_arrays({k: batch[k] for k in _UPDATE_KEYS}, self.spec.action_kind))
        log.append(row)
        return stats

    ppo.PPOLearner.update = update
    try:
        yield
    finally:
        ppo.PPOLearner.update = original


class _ProbeEveryIteration:
    """A trainer controller that asks for the layout probe (halves of each env's segment) on
    every iteration and changes nothing."""

    def layout_probe(self) -> tuple[int, ...]:
        return (2,)

    def after_iteration(self, record: Any) -> None:
        return None


def noise_to_signal(records: list[Any]) -> float | None:
    """The probe's pooled noise-to-signal ratio of the batch gradient over ``records``; None
    when the pooled signal is not positive."""
    var = signal = 0.0
    envs = 0
    for r in records:
        probe = getattr(r, "layout_probe", None) or {}
        envs = int(probe.get("envs", envs))
        for row in probe.get("layouts", []):
            for pair in row["pairs"]:
                var += float(pair["var_env"])
                signal += float(pair["signal"])
    return var / (envs * signal) if signal > 0 and envs > 0 else None


def _workload(env: str, max_steps: int | None = None) -> Any:
    from optimizers.seraph.pilot import workload_for

    return workload_for(env, max_steps, steps_per_env=0)  # the static default's layout: one env per function


def sweep(env: str, batches: list[int], seeds: list[int]) -> list[dict[str, Any]]:
    """Full runs to the target at the static default's layout, one per batch and seed."""
    from optimizers.rl_baselines.common import train_shape

    rows, workload = [], _workload(env)
    for batch in batches:
        for seed in seeds:
            progress(f"{env} batch {batch} seed {seed}")
            out = train_shape(workload, replace(STATIC_DEFAULT, batch=batch), target_reward=TARGETS[env], seed=seed)
            rows.append({"env": env, "batch": batch, "seed": seed, **out})
    return rows


def early_statistics(env: str, seeds: list[int], iterations: int) -> list[dict[str, Any]]:
    """Per seed, the medians over the first ``iterations`` iterations at batch 4,000 of the
    update's statistics and of the held-out ratio ``R``."""
    from optimizers.rl_baselines.common import _spec
    from serverless.trainer import train

    batch = DEFAULT_BATCHES[0]
    workload = _workload(env, iterations * batch)  # a target out of reach: exactly `iterations` iterations
    rows = []
    for seed in seeds:
        progress(f"{env} seed {seed}: early statistics")
        log: list[dict[str, float]] = []
        spec = _spec(workload, replace(STATIC_DEFAULT, batch=batch), target_reward=1e12, seed=seed,
                     max_steps=iterations * batch, backend="local")
        with instrumented_updates(log):
            res = train(spec, controller=_ProbeEveryIteration(), progress=False)
        stats = [r.ppo_stats for r in res.iterations]
        ratios = [2 * r["half_out"] / r["full_in"] for r in log if r["full_in"] > 0]
        rows.append({
            "env": env, "seed": seed, "iterations": len(stats),
            "approx_kl": statistics.median(float(s["approx_kl"]) for s in stats),
            "clipfrac": statistics.median(float(s["clipfrac"]) for s in stats),
            "explained_variance": statistics.median(float(s.get("explained_variance") or 0.0) for s in stats),
            "held_out_ratio": statistics.median(ratios) if ratios else None,
            "noise_to_signal": noise_to_signal(res.iterations),
            "per_iteration": log,
        })
    return rows


def summarise(env: str, runs: list[dict[str, Any]], early: list[dict[str, Any]]) -> dict[str, Any]:
    """Each batch's medians and their ratios to batch 4,000's; the early statistics' medians."""
    by = {b: [r for r in runs if r["batch"] == b] for b in sorted({r["batch"] for r in runs}, reverse=True)}
    med = {b: {k: statistics.median(r[k] for r in rs) for k in ("env_steps", "cost_usd", "lambda_time_s")}
           for b, rs in by.items()}
    base = med[DEFAULT_BATCHES[0]]
    out: dict[str, Any] = {"env": env, "reached": {b: sum(r["reached"] for r in rs) for b, rs in by.items()},
                           "medians": med}
    out["vs_default"] = {b: {k: m[k] / base[k] for k in m} for b, m in med.items()}
    for key in ("approx_kl", "clipfrac", "explained_variance", "held_out_ratio", "noise_to_signal"):
        vals = [e[key] for e in early if e[key] is not None]
        out[key] = statistics.median(vals) if vals else None
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--envs", default="Acrobot-v1,benchmarks.beacon_env:Beacon-v0,Pendulum-v1",
                    help=f"comma-separated; each must have a target in benchmarks.seraph.TARGETS ({', '.join(TARGETS)})")
    ap.add_argument("--seeds", default="0,1,2")
    ap.add_argument("--batches", default=",".join(map(str, DEFAULT_BATCHES)),
                    help="the first is the default the others are compared with")
    ap.add_argument("--probe-iterations", type=int, default=6)
    ap.add_argument("--json-out", default=None)
    args = ap.parse_args(argv)
    envs, seeds = envs_and_seeds(ap, args)
    try:
        batches = [int(b) for b in args.batches.split(",") if b]
    except ValueError:
        ap.error(f"--batches must be comma-separated integers, got {args.batches!r}")
    if not batches or batches[0] != DEFAULT_BATCHES[0]:
        ap.error(f"--batches must start with the static default's {DEFAULT_BATCHES[0]}")
    result: dict[str, Any] = {"seeds": seeds, "batches": batches, "labels": {
        "env_steps": "measured", "cost_usd": "modelled (price table)", "lambda_time_s": "modelled (Lambda clock)"}}
    summaries, runs, early = [], [], []
    with recording_load(result):
        for env in envs:
            env_runs, env_early = sweep(env, batches, seeds), early_statistics(env, seeds, args.probe_iterations)
            runs += env_runs
            early += env_early
            summaries.append(summarise(env, env_runs, env_early))
    result.update(summaries=summaries, runs=runs, early=early)
    rows = [
        [s["env"].split(":")[-1]]
        + [f"{s['vs_default'][b]['cost_usd']:.2f}x / {s['vs_default'][b]['env_steps']:.2f}x" for b in batches[1:]]
        + [f"{s['approx_kl']:.4f}", f"{s['clipfrac']:.3f}", f"{s['explained_variance']:.2f}",
           "-" if s["held_out_ratio"] is None else f"{s['held_out_ratio']:.2f}",
           "-" if s["noise_to_signal"] is None else f"{s['noise_to_signal']:.3f}"]
        for s in summaries
    ]
    print_table(["env"] + [f"batch {b}: cost / env steps vs {batches[0]}" for b in batches[1:]]
                + ["approx KL", "clip fraction", "explained var.", "held-out R", "noise/signal"], rows,
                title="smaller batches (medians over seeds; cost modelled, env steps measured) and the early statistics at the default")
    if args.json_out:
        write_result(args.json_out, result)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
