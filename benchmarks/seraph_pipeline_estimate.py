"""What would overlapping the rollouts with the update save? An estimate for a loop not built.

At the static default (2 functions of 1,769 MB, batch 4,000, one env per function) the learner
VM, which is most of the bill, waits for the rollouts about half of every iteration, and the
functions wait for the update. A pipelined loop would send the next iteration's rollouts out
before the update, with the policy the current rollouts used, so the functions collect while
the learner updates: the rollouts lag the learner by one update (PPO's ratio is taken against
the policy that acted, which the rollouts record, so the update stays PPO's; the clipping
starts from a ratio that is no longer one).

This benchmark measures the two sides of that trade on the real trainer and labels them:

* **env steps to the target with a one-update policy lag** (measured): the trainer as it is,
  with the weights each iteration sends out replaced by those the previous iteration sent (the
  first iteration's own), against the same seeds without the lag; a rank-sum test over seeds;
* **the pipelined loop's time and cost** (modelled, an estimate): each lagged run's own
  iterations laid on the pipelined timeline, ``R_0 + O_0 + Σ_k≥1 [max(R_k, U_k−1) + O_k] +
  U_last``, where ``R`` is an iteration's rollouts on the Lambda clock (the invoke overhead
  included), ``U`` the update's part of the learner host's time and ``O`` the rest of it
  (encoding, decoding, GAE), which stays serial. The learner VM is billed for that time; the
  functions' GB-seconds and requests are the run's own.

    .venv/bin/python -m benchmarks.seraph_pipeline_estimate \\
        --envs Acrobot-v1,benchmarks.beacon_env:Beacon-v0,Pendulum-v1,LunarLander-v3 --seeds 0,1,2,3,4 \\
        --json-out benchmarks/results/seraph-pipeline-estimate-DATE.json
"""

from __future__ import annotations

import argparse
import copy
import statistics
from contextlib import contextmanager, nullcontext
from types import SimpleNamespace
from typing import Any, Iterator

from benchmarks._common import print_table, progress, recording_load, write_result
from benchmarks.seraph import TARGETS, envs_and_seeds


@contextmanager
def one_update_lag() -> Iterator[None]:
    """While open, every iteration's rollouts get the policy the previous iteration's got."""
    from serverless import trainer

    original = trainer.rollout_events
    sent: dict[str, Any] = {}

    def lagged(env_id: str, seed: int, iteration: int, learner: Any, *args: Any, **kwargs: Any) -> Any:
        now = copy.deepcopy(learner.model)
        if iteration == 0:
            sent.clear()
        previous = sent.get("model", now)
        sent["model"] = now
        return original(env_id, seed, iteration, SimpleNamespace(model=previous, spec=learner.spec), *args, **kwargs)

    trainer.rollout_events = lagged
    try:
        yield
    finally:
        trainer.rollout_events = original


def pipelined_seconds(records: list[Any]) -> float:
    """The run's iterations on the pipelined timeline (the module's docstring), modelled."""
    rollouts = [float(r.lambda_s) for r in records]
    updates = [float(r.learner_cpu_s) * float(r.host_speed) for r in records]  # the host clock's CPU correction
    others = [max(float(r.host_s) - u, 0.0) for r, u in zip(records, updates)]
    if not records:
        return 0.0
    total = rollouts[0] + others[0] + updates[-1]
    for k in range(1, len(records)):
        total += max(rollouts[k], updates[k - 1]) + others[k]
    return total


def run(env: str, seed: int, lag: bool) -> dict[str, Any]:
    """One run at the static default, with or without the lag; its figures and the estimate."""
    from optimizers.rl_baselines.common import _spec
    from optimizers.rl_baselines.static import STATIC_DEFAULT
    from optimizers.seraph.pilot import workload_for
    from serverless.trainer import train

    workload = workload_for(env, None, steps_per_env=0)
    spec = _spec(workload, STATIC_DEFAULT, target_reward=TARGETS[env], seed=seed, max_steps=workload.max_steps,
                 backend="local")
    with one_update_lag() if lag else nullcontext():
        res = train(spec, progress=False)
    ledger = res.ledger
    pipe_s = pipelined_seconds(res.iterations)
    return {
        "env": env, "seed": seed, "lag": int(lag), "reached": res.reached, "env_steps": res.env_steps,
        "iterations": len(res.iterations), "lambda_time_s": res.lambda_time_s, "cost_usd": res.cost_usd,
        "pipelined_time_s": pipe_s,
        "pipelined_cost_usd": ledger.function_usd + ledger.request_usd + ledger.prices.vm_cost(pipe_s),
    }


def summarise(env: str, rows: list[dict[str, Any]]) -> dict[str, Any]:
    from optimizers.seraph.stats import rank_sum_p

    sync = [r for r in rows if not r["lag"]]
    lag = [r for r in rows if r["lag"]]

    def med(rs: list[dict[str, Any]], k: str) -> float:
        return statistics.median(r[k] for r in rs)

    return {
        "env": env,
        "reached": {"sync": sum(r["reached"] for r in sync), "lag": sum(r["reached"] for r in lag), "runs": len(sync)},
        "env_steps_median": {"sync": med(sync, "env_steps"), "lag": med(lag, "env_steps")},
        "env_steps_ratio": med(lag, "env_steps") / med(sync, "env_steps"),
        "env_steps_rank_sum_p": rank_sum_p([r["env_steps"] for r in lag], [r["env_steps"] for r in sync]),
        "pipelined_cost_ratio": med(lag, "pipelined_cost_usd") / med(sync, "cost_usd"),
        "pipelined_time_ratio": med(lag, "pipelined_time_s") / med(sync, "lambda_time_s"),
        "same_steps_cost_ratio": med(sync, "pipelined_cost_usd") / med(sync, "cost_usd"),
        "same_steps_time_ratio": med(sync, "pipelined_time_s") / med(sync, "lambda_time_s"),
    }


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--envs", default="Acrobot-v1,benchmarks.beacon_env:Beacon-v0,Pendulum-v1",
                    help=f"comma-separated; each must have a target in benchmarks.seraph.TARGETS ({', '.join(TARGETS)})")
    ap.add_argument("--seeds", default="0,1,2")
    ap.add_argument("--json-out", default=None)
    args = ap.parse_args(argv)
    envs, seeds = envs_and_seeds(ap, args)
    result: dict[str, Any] = {"seeds": seeds, "labels": {
        "env_steps": "measured", "cost_usd, lambda_time_s": "modelled (price table, Lambda clock)",
        "pipelined_*": "modelled estimate for a pipelined loop that is not built"}}
    rows, summaries = [], []
    with recording_load(result):
        for env in envs:
            env_rows = []
            for seed in seeds:
                for lag in (False, True):
                    progress(f"{env} seed {seed}{' with a one-update lag' if lag else ''}")
                    env_rows.append(run(env, seed, lag))
            rows += env_rows
            summaries.append(summarise(env, env_rows))
    result.update(summaries=summaries, runs=rows)
    print_table(
        ["env", "env steps, lag / sync (p)", "pipelined cost vs static", "pipelined time vs static",
         "same env steps: cost / time"],
        [[s["env"].split(":")[-1], f"{s['env_steps_ratio']:.2f}x (p {s['env_steps_rank_sum_p']:.2f})",
          f"{s['pipelined_cost_ratio']:.2f}x", f"{s['pipelined_time_ratio']:.2f}x",
          f"{s['same_steps_cost_ratio']:.2f}x / {s['same_steps_time_ratio']:.2f}x"] for s in summaries],
        title="a pipelined loop at the static default (env steps measured; time and cost a modelled estimate)",
    )
    if args.json_out:
        write_result(args.json_out, result)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
