"""Seraph vs baselines: time and cost to the target reward, side by side in one run.

    flock /tmp/trainwise-bench.lock .venv/bin/python -m benchmarks.seraph \\
        --envs CartPole-v1 --seeds 0,1,2 [--quick] --json-out runs/seraph-bench.json

Every method trains through the same trainer and cost ledger on the local backend.
Time and cost are the **modelled** Lambda figures (the emulator's Lambda clock at the
concurrency each plan asks, and the price table); the measured local wall time is
shown beside them. Tuning overhead (Seraph's pilot, the memory sweep's invocations,
Optuna's trials) is included in each method's total.

The modelled clock is CPU time, steadier than wall time under other load but not immune
(the static default's identical runs have cost 0.56e-3 to 0.71e-3 in different runs), so a
grid taken from an earlier run (``--grid-from``) is compared side by side only through
``--oracle-top K``: the grid's best K shapes per objective are re-run here, on the same
seeds, interleaved with the other methods, and the oracle is the best of them as
re-measured. Training is deterministic given seed and shape, so the re-runs take the
same env steps; only the clock is of this run.

Methods: static default (RLlib PPO defaults: 2 actors, batch 4,000, 1,769 MB, one env
per actor); every other method trains with env slots of ``--steps-per-env`` steps, the
tuner's default, so that the function count does not change what is learned;
Seraph cost and speed objectives (re-profiled per seed; the run resumes from the
pilot); Lambda-Power-Tuning-style memory sweep; Optuna TPE with Seraph's pilot
cost as its trial budget; a grid of full runs (its best shape is the oracle).
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from serverless.run_shape import RunShape
from optimizers.seraph.pilot import DEFAULT_STEPS_PER_ENV

TARGETS = {
    "CartPole-v1": 475.0, "LunarLander-v3": 200.0, "Pendulum-v1": -200.0, "Acrobot-v1": -100.0,
    "benchmarks.beacon_env:Beacon-v0": -12.0,  # a user's own module env (benchmarks/beacon_env.py)
    # the same with continuous actions: the static default reaches -8 in 32,000 env steps on seeds 0-2,
    # on the steep part of its curve (its plateau is about -5)
    "benchmarks.beacon_env:BeaconContinuous-v0": -8.0,
}


def envs_and_seeds(ap: argparse.ArgumentParser, args: argparse.Namespace) -> tuple[list[str], list[int]]:
    """``--envs`` (each with a target in :data:`TARGETS`) and ``--seeds`` (integers); a usage
    error that names what is allowed otherwise."""
    envs = [e for e in args.envs.split(",") if e]
    unknown = [e for e in envs if e not in TARGETS]
    if unknown:
        ap.error(f"unknown env(s) {unknown}; allowed: {', '.join(TARGETS)}")
    try:
        seeds = [int(s) for s in args.seeds.split(",") if s]
    except ValueError:
        ap.error(f"--seeds must be comma-separated integers, got {args.seeds!r}")
    return envs, seeds


#: benchmark envs with no committed reference runs: Seraph plans them from its pilot alone
WITHOUT_REFERENCES = ("Acrobot-v1", "benchmarks.beacon_env:Beacon-v0", "benchmarks.beacon_env:BeaconContinuous-v0")
GRID_FULL = [RunShape(a, m, b) for a in (1, 4, 16) for m in (885, 1769, 3008) for b in (512, 1024, 2048, 4000)]
GRID_QUICK = [RunShape(a, 1769, b) for a in (1, 8) for b in (512, 1024, 4000)] + [RunShape(1, 885, 512)]
# LunarLander runs are long: the grid is the shapes the cost and speed objectives can
# want (the smallest batch, 1 to 16 actors) plus a larger batch, at one vCPU.
GRID_LUNAR = [RunShape(a, 1769, 2048) for a in (1, 4, 16)] + [RunShape(4, 1769, 8192)]


def _log(msg: str) -> None:
    print(f"[{time.strftime('%H:%M:%S')}] {msg}", file=sys.stderr, flush=True)


def _seraph(
    env: str, seed: int, objective: str, target: float, max_steps: int | None, cached: bool,
    steps_per_env: int | None = None, ignore_references: bool = False,
) -> dict[str, Any]:
    """``steps_per_env=None``: Seraph chooses the layout (optimizers.seraph.layout).
    ``cached=False``: profile afresh (the pilot is the start of training; its cost counts).
    ``cached=True``: reuse the profile the fresh run just stored (a second tuning of the
    same workload): no pilot, training from scratch with the plan."""
    from contextlib import nullcontext

    from optimizers.seraph import SeraphJob, SeraphRequest, tune_and_train
    from optimizers.seraph.references import references_ignored

    request = SeraphRequest(
        env, target, objective=objective, seed=seed, max_steps=max_steps, steps_per_env=steps_per_env
    )
    with references_ignored() if ignore_references else nullcontext():
        job = SeraphJob.of(request)  # the job reads every reference it uses, once
    with tempfile.TemporaryDirectory() as tmp:
        res = tune_and_train(job, reprofile=not cached, run_dir=Path(tmp)).to_dict()
    a = res["achieved"]
    ov = res["tuning_overhead"]
    return {
        "method": f"seraph_{objective}" + ("_cached_profile" if cached else ""),
        "config": res["plan"]["config"],
        "reached": a["reached"],
        "env_steps": a["env_steps"],
        "lambda_time_s": a["lambda_time_s"],
        "cost_usd": a["cost_usd"],
        "wall_s": a["wall_s"] + ov["profiling_wall_s"],
        "tuning_cost_usd": ov["gross_cost_usd"],
        # what tuning cost beyond the training the pilot did (see accounting.tuning_overhead)
        "net_tuning_cost_usd": ov["net_cost_usd"],
        "tuning_lambda_s": ov["profiling_lambda_time_s"] + ov["planning_cpu_s"],
        "pilot_cost_usd": ov["profiling_cost_usd"],
        "planning_wall_s": ov["planning_wall_s"],
        "phases": res["phases"],
        "decisions": [d for d in res["decisions"] if d["changed"]],
        "layout_decisions": res.get("layout_decisions", []),
        "model_check": res["model_check"],
        "b_noise_pilot": res["profile"]["b_noise_pilot"],
        "b_noise_final": res["training"]["b_noise_final"],
        "controller_s": res["training"]["controller_s"],
        "predicted": res["plan"]["predicted"],
        "layout": res["plan"].get("layout"),
        "baseline_verdict": res["plan"].get("baseline"),
    }


# static_repeat: the static default once more on each seed, after Seraph: two runs of the very
# same trajectory, whose cost ratio is the modelled clock's run-to-run noise
METHODS = ("static", "seraph", "static_repeat", "memory_sweep", "optuna", "grid")


def run_env(
    env: str, seeds: list[int], quick: bool, max_steps: int | None, partial: Path | None = None, methods: tuple[str, ...] = METHODS,
    grid_shapes: list[RunShape] | None = None, remeasure: list[RunShape] = (), steps_per_env: int = DEFAULT_STEPS_PER_ENV,
    cached_twins: bool = True, ignore_references: bool = False, objectives: tuple[str, ...] = ("cost", "speed"),
) -> dict[str, Any]:
    from optimizers.rl_baselines.grid import oracle, run_grid
    from optimizers.rl_baselines.memory_sweep import run_memory_sweep
    from optimizers.rl_baselines.optuna_search import run_optuna
    from optimizers.rl_baselines.static import run_static
    from optimizers.seraph.pilot import workload_for
    from optimizers.seraph.job import search_space_for
    from optimizers.seraph.space import DEFAULT_MEMORY_SWEEP
    from serverless.backends import make_backend

    target = TARGETS[env]
    workload = workload_for(env, max_steps, steps_per_env=steps_per_env)
    space = search_space_for(workload, DEFAULT_MEMORY_SWEEP)

    class _Runs(list):  # every finished run is saved at once, so a long benchmark loses nothing
        def append(self, item: Any) -> None:
            super().append(item)
            if partial is not None:
                from core.results import write_json

                write_json(partial, {"env": env, "partial": True, "runs": list(self)})

    runs = _Runs()
    remeasured: list[dict[str, Any]] = []
    for seed in seeds:
        for shape in remeasure:
            _log(f"{env} seed {seed}: oracle candidate {shape.actors}x{shape.memory_mb}x{shape.batch} (re-measured)")
            remeasured += run_grid(workload, [shape], target_reward=target, seeds=[seed])
        if "static" in methods:
            _log(f"{env} seed {seed}: static default")
            runs.append({"seed": seed, **run_static(workload, target_reward=target, seed=seed)})
        if "seraph" in methods:
            for objective in objectives:
                for cached in (False, True) if cached_twins else (False,):
                    _log(f"{env} seed {seed}: seraph {objective}{' (cached profile)' if cached else ''}")
                    runs.append({"seed": seed, **_seraph(env, seed, objective, target, max_steps, cached,
                                                         ignore_references=ignore_references)})
        if "static_repeat" in methods:
            _log(f"{env} seed {seed}: static default again")
            runs.append({"seed": seed, **run_static(workload, target_reward=target, seed=seed), "method": "static_repeat"})
        if "memory_sweep" not in methods and "optuna" not in methods:
            continue
        pilot_cost = next((r["pilot_cost_usd"] for r in runs if r["method"] == "seraph_cost" and r["seed"] == seed), None)
        probe = make_backend("local")
        try:
            for objective in (() if "memory_sweep" not in methods else ("cost",) if quick else ("cost", "speed")):
                _log(f"{env} seed {seed}: memory sweep {objective}")
                runs.append({"seed": seed, **run_memory_sweep(workload, target_reward=target, seed=seed, objective=objective, backend_obj=probe)})
            for objective in ("cost", "speed") if "optuna" in methods and pilot_cost is not None else ():
                _log(f"{env} seed {seed}: optuna {objective} (trial budget ${pilot_cost:.6f})")
                runs.append({"seed": seed, **run_optuna(workload, space, target_reward=target, seed=seed, objective=objective, budget_usd=pilot_cost, backend_obj=probe)})
        finally:
            probe.close()
    if grid_shapes is None:
        grid_shapes = GRID_LUNAR if env.startswith("LunarLander") else (GRID_QUICK if quick else GRID_FULL)
        # the oracle's space is the tuner's: with env slots, no more functions than slots
        grid_shapes = [g for g in grid_shapes if g.batch / g.actors >= space.min_steps_per_actor]
    grid: list[dict[str, Any]] = []
    if "grid" in methods:
        _log(f"{env}: grid of {len(grid_shapes)} shapes x {len(seeds)} seeds")
        grid = run_grid(workload, grid_shapes, target_reward=target, seeds=seeds)
    res = {"env": env, "target_reward": target, "workload": workload.key_dict(), "runs": list(runs), "grid": grid,
           "oracle": {o: oracle(grid, o) for o in ("cost", "speed")}}
    if remeasured:
        res["oracle_remeasured_runs"] = remeasured
    return res


def _median(rows: list[dict[str, Any]], key: str) -> float | None:
    vals = [r[key] for r in rows if r.get(key) is not None]
    return statistics.median(vals) if vals else None


def _oracle_steps(env_result: dict[str, Any], config: dict[str, int]) -> float | None:
    """Median env steps of the oracle shape over the runs it was judged on (the re-run
    candidates when there are any, else the grid)."""
    rows = env_result.get("oracle_remeasured_runs") or env_result.get("grid") or []
    steps = [r["env_steps"] for r in rows if r.get("config") == config and r.get("reached")]
    return statistics.median(steps) if steps else None


def _per_seed_ratios(runs: list[dict[str, Any]], method: str, key: str) -> list[float]:
    """``method``'s figure over the static default's on the same seed, per seed."""
    static = {r["seed"]: r[key] for r in runs if r["method"] == "static_default" and r.get(key)}
    return [r[key] / static[r["seed"]] for r in runs if r["method"] == method and r["seed"] in static]


def _per_seed_ratio(runs: list[dict[str, Any]], method: str, key: str) -> float | None:
    """The median over seeds of ``method``'s figure over the static default's on the same seed."""
    ratios = _per_seed_ratios(runs, method, key)
    return statistics.median(ratios) if ratios else None


def _per_seed_range(runs: list[dict[str, Any]], method: str, key: str) -> list[float] | None:
    """The smallest and largest of ``method``'s per-seed ratios to the static default."""
    ratios = _per_seed_ratios(runs, method, key)
    return [min(ratios), max(ratios)] if ratios else None


def _steps_error(runs: list[dict[str, Any]]) -> float | None:
    """Median relative error of Seraph's predicted env steps to the target (its plan's) against
    the measured steps of the runs that reached it."""
    errs = [abs(r["predicted"]["env_steps"] - r["env_steps"]) / r["env_steps"] for r in runs
            if r["method"].startswith("seraph") and r.get("predicted") and r["reached"] and r["env_steps"]]
    return statistics.median(errs) if errs else None


def grid_against_static(env_result: dict[str, Any]) -> list[dict[str, Any]]:
    """Every grid shape against the static default run on the same seeds, cheapest first: its
    median cost, time and env steps over the static default's medians, and its worst seed's
    cost ratio. A grid that covers the search space shows what a fixed configuration chosen in
    hindsight (knowing every seed's outcome) would give: the most a tuner that keeps one
    configuration for the whole run could save."""
    from optimizers.rl_baselines.grid import SHAPE_KEYS, runs_by_shape

    static = [r for r in env_result["runs"] if r["method"] == "static_default"]
    by_seed = {r["seed"]: r for r in static}
    base = {key: _median(static, key) for key in ("cost_usd", "lambda_time_s", "env_steps")}
    if not static or not all(base.values()):
        return []
    rows = []
    for shape, runs in runs_by_shape(env_result.get("grid") or []).items():
        paired = [r["cost_usd"] / by_seed[r["seed"]]["cost_usd"] for r in runs if r["seed"] in by_seed]
        rows.append({
            "config": dict(zip(SHAPE_KEYS, shape)),
            "seeds": len(runs),
            "reached": sum(bool(r["reached"]) for r in runs),
            **{f"{name}_vs_static": _median(runs, key) / base[key]
               for name, key in (("cost", "cost_usd"), ("time", "lambda_time_s"), ("env_steps", "env_steps"))},
            "worst_seed_cost_vs_static": max(paired) if paired else None,
        })
    return sorted(rows, key=lambda row: row["cost_vs_static"])


def _seed_interval(rows: list[dict[str, Any]], key: str) -> dict[str, Any] | None:
    from benchmarks._common import bootstrap_interval, seed_mean

    iv = bootstrap_interval(seed_mean, [r[key] for r in rows if r.get(key) is not None])
    return iv.as_dict() if iv else None


def _sum(rows: list[dict[str, Any]], key: str) -> float | None:
    vals = [r[key] for r in rows if r.get(key) is not None]
    return sum(vals) if vals else None


#: the bill's figures against the static default: ratio of sums over the same seeds (for time, the
#: ratio of means, which is the same number)
BILL_KEYS = (("cost", "cost_usd"), ("time", "lambda_time_s"), ("env_steps", "env_steps"))


def bill_against_static(runs: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """What each method's runs cost in all, against the static default's runs on the same seeds:
    per figure the ratio of the sums (the user's bill for those seeds; for time, the ratio of the
    mean time) with a paired bootstrap interval over seeds. ``static_repeat`` is the control: the
    same static runs again, so its ratio is the modelled clock's run-to-run noise."""
    from benchmarks._common import bootstrap_interval, sum_ratio

    static = {r["seed"]: r for r in runs if r["method"] == "static_default"}
    rows = []
    for method in sorted({r["method"] for r in runs} - {"static_default"}, key=lambda m: (m != "static_repeat", m)):
        paired = [(r, static[r["seed"]]) for r in runs if r["method"] == method and r["seed"] in static]
        if not paired:
            continue
        row: dict[str, Any] = {"method": method, "seeds": len(paired), "reached": sum(bool(r["reached"]) for r, _ in paired),
                               "control": method == "static_repeat"}
        for name, key in BILL_KEYS:
            pairs = [(r[key], s[key]) for r, s in paired if r.get(key) is not None and s.get(key)]
            if not pairs:
                continue
            mine, base = [p[0] for p in pairs], [p[1] for p in pairs]
            row[f"sum_{key}"], row[f"static_sum_{key}"] = sum(mine), sum(base)
            row[f"{name}_sum_ratio"] = sum(mine) / sum(base)
            iv = bootstrap_interval(sum_ratio, mine, base)
            row[f"{name}_sum_ratio_interval"] = iv.as_dict() if iv else None
        rows.append(row)
    return rows


#: the bill's headline figures, by (method, figure), as bars beside the medians' bars
BILL_BARS = {("seraph_cost", "cost"): "cost_objective_bill_ratio_vs_static",
             ("seraph_speed", "time"): "speed_objective_mean_time_ratio_vs_static",
             ("static_repeat", "cost"): "static_repeat_bill_ratio_vs_static"}


def bill_bars(bill: list[dict[str, Any]]) -> dict[str, float]:
    """The headline ratios of the bill table (their intervals stay in the table)."""
    rows = {row["method"]: row for row in bill}
    return {bar: rows[m][f"{fig}_sum_ratio"] for (m, fig), bar in BILL_BARS.items() if f"{fig}_sum_ratio" in rows.get(m, {})}


def summarise(env_result: dict[str, Any]) -> dict[str, Any]:
    runs = env_result["runs"]
    methods = sorted({r["method"] for r in runs}, key=lambda m: (not m.startswith("static"), m))
    table = []
    for m in methods:
        rows = [r for r in runs if r["method"] == m]
        table.append({
            "method": m,
            "seeds": len(rows),
            "reached": sum(r["reached"] for r in rows),
            "median_lambda_time_s_modelled": _median(rows, "lambda_time_s"),
            "median_cost_usd_modelled": _median(rows, "cost_usd"),
            "median_wall_s_measured": _median(rows, "wall_s"),
            "median_tuning_cost_usd_modelled": _median(rows, "tuning_cost_usd"),
            "median_net_tuning_cost_usd_modelled": _median(rows, "net_tuning_cost_usd"),
            "median_env_steps": _median(rows, "env_steps"),
            # the bill: what the seeds cost in all, and the mean per seed with its interval
            "sum_cost_usd_modelled": _sum(rows, "cost_usd"),
            "mean_cost_usd_modelled": _seed_interval(rows, "cost_usd"),
            "mean_lambda_time_s_modelled": _seed_interval(rows, "lambda_time_s"),
        })
    by = {t["method"]: t for t in table}
    st, sc, ss = by.get("static_default"), by.get("seraph_cost"), by.get("seraph_speed")
    bars: dict[str, Any] = {}
    if st and sc:
        c_ratio = sc["median_cost_usd_modelled"] / st["median_cost_usd_modelled"]
        t_ratio = sc["median_lambda_time_s_modelled"] / st["median_lambda_time_s_modelled"]
        bars["cost_objective_cost_ratio_vs_static"] = c_ratio
        bars["cost_objective_time_ratio_vs_static"] = t_ratio
        bars["cost_objective_bar_met"] = c_ratio <= 0.7 and t_ratio <= 1.2
        bars["cost_objective_median_per_seed_cost_ratio"] = _per_seed_ratio(runs, "seraph_cost", "cost_usd")
        bars["cost_objective_median_per_seed_time_ratio"] = _per_seed_ratio(runs, "seraph_cost", "lambda_time_s")
        saved = st["median_cost_usd_modelled"] - sc["median_cost_usd_modelled"]
        gross, net = sc["median_tuning_cost_usd_modelled"], sc["median_net_tuning_cost_usd_modelled"]
        bars["tuning_overhead_gross_share_of_saving"] = gross / saved if saved > 0 else None
        bars["tuning_overhead_net_share_of_saving"] = net / saved if saved > 0 else None
        bars["tuning_overhead_bar_met_gross"] = saved > 0 and gross < 0.1 * saved
        bars["tuning_overhead_bar_met_net"] = saved > 0 and net < 0.1 * saved
    if st and sc:
        # what Seraph itself adds beyond training (clock-free of the training's noise), and the
        # noise floor: the same trajectory run twice
        bars["cost_objective_net_tuning_cost_share_of_static"] = sc["median_net_tuning_cost_usd_modelled"] / st["median_cost_usd_modelled"]
        bars["cost_objective_env_steps_vs_static"] = sc["median_env_steps"] / st["median_env_steps"]
    if st and by.get("static_repeat"):
        bars["static_repeat_cost_ratio_vs_static"] = by["static_repeat"]["median_cost_usd_modelled"] / st["median_cost_usd_modelled"]
        bars["static_repeat_median_per_seed_cost_ratio"] = _per_seed_ratio(runs, "static_repeat", "cost_usd")
        bars["static_repeat_per_seed_cost_ratio_range"] = _per_seed_range(runs, "static_repeat", "cost_usd")
    if st and ss:
        bars["speed_objective_time_ratio_vs_static"] = ss["median_lambda_time_s_modelled"] / st["median_lambda_time_s_modelled"]
        bars["speed_objective_bar_met"] = bars["speed_objective_time_ratio_vs_static"] < 1.0
        bars["speed_objective_median_per_seed_time_ratio"] = _per_seed_ratio(runs, "seraph_speed", "lambda_time_s")
    orc = env_result["oracle"]
    for suffix in ("", "_cached_profile"):
        c, s_ = by.get("seraph_cost" + suffix), by.get("seraph_speed" + suffix)
        if c and orc.get("cost"):
            bars[f"cost_objective{suffix}_vs_oracle"] = c["median_cost_usd_modelled"] / orc["cost"]["median"]
            bars[f"cost_oracle_bar_met{suffix}"] = bars[f"cost_objective{suffix}_vs_oracle"] <= 1.15
        if s_ and orc.get("speed"):
            bars[f"speed_objective{suffix}_vs_oracle"] = s_["median_lambda_time_s_modelled"] / orc["speed"]["median"]
            bars[f"speed_oracle_bar_met{suffix}"] = bars[f"speed_objective{suffix}_vs_oracle"] <= 1.15
    # A clock-free diagnostic beside each oracle ratio (not a bar): median env steps to the
    # target against the oracle shape's, on the runs that set the oracle. Steps are counted, so
    # they read older results too, whose uncorrected CPU-time clock moved 2x within one run.
    for suffix in ("", "_cached_profile"):
        for objective in ("cost", "speed"):
            row, o = by.get(f"seraph_{objective}{suffix}"), orc.get(objective)
            steps = _oracle_steps(env_result, o["config"]) if o else None
            if row and steps:
                bars[f"{objective}_objective{suffix}_env_steps_vs_oracle"] = row["median_env_steps"] / steps
    errs = [r["model_check"]["iteration_time_median_abs_error"] for r in runs if r["method"].startswith("seraph") and r["model_check"]["iteration_time_median_abs_error"] is not None]
    if errs:
        bars["iteration_time_prediction_median_abs_error"] = statistics.median(errs)
        bars["prediction_bar_met"] = bars["iteration_time_prediction_median_abs_error"] < 0.2
    bars["steps_to_target_prediction_median_abs_error"] = _steps_error(runs)
    if st and env_result.get("grid"):
        # the grid's own best shape per objective (which the oracle is, unless it was re-measured)
        from optimizers.rl_baselines.grid import oracle

        for objective, key in (("cost", "cost_usd"), ("speed", "lambda_time_s")):
            best = oracle(env_result["grid"], objective)
            if best:
                bars[f"grid_best_{objective}_vs_static"] = best[f"median_{key}"] / st[f"median_{key}_modelled"]
    bill = bill_against_static(runs)
    bars.update(bill_bars(bill))
    return {"table": table, "bars": bars, "bill": bill, "grid_vs_static": grid_against_static(env_result)}


def print_table(env: str, summary: dict[str, Any], oracle: dict[str, Any]) -> None:
    print(f"\n{env}: medians over seeds, and the sum and mean of cost over seeds (mean with its 95% bootstrap "
          "interval). time and cost MODELLED (local Lambda emulator clock, price table); wall MEASURED")
    print(f"{'method':<30}{'reached':>9}{'time s':>10}{'cost USD':>12}{'tuning USD':>12}{'wall s':>9}{'steps':>9}"
          f"{'sum cost USD':>14}  mean cost USD [interval]")
    for t in summary["table"]:
        mean = t.get("mean_cost_usd_modelled")
        total = t.get("sum_cost_usd_modelled")
        print(
            f"{t['method']:<30}{t['reached']:>5}/{t['seeds']:<3}{t['median_lambda_time_s_modelled']:>10.1f}"
            f"{t['median_cost_usd_modelled']:>12.6f}{(t['median_tuning_cost_usd_modelled'] or 0):>12.6f}"
            f"{t['median_wall_s_measured']:>9.1f}{t['median_env_steps']:>9.0f}"
            f"{'-' if total is None else f'{total:.6f}':>14}  "
            + ("-" if not mean else f"{mean['estimate']:.6f} [{mean['low']:.6f}, {mean['high']:.6f}]")
        )
    for o, v in oracle.items():
        if v:
            how = " (re-measured here)" if v.get("rule") else ""
            print(f"grid oracle ({o}){how}: {v['config']}  time {v['median_lambda_time_s']:.1f} s  cost ${v['median_cost_usd']:.6f}")
    grid = summary.get("grid_vs_static") or []
    if grid:
        print("grid against the static default (median over median; worst seed's cost over its static run):")
        print(f"  {'actors x MB x batch':<22}{'reached':>9}{'cost':>8}{'worst':>8}{'time':>8}{'steps':>8}")
        for row in grid:
            c = row["config"]
            worst = row["worst_seed_cost_vs_static"]
            print(f"  {c['actors']:>6} x {c['memory_mb']:>5} x {c['batch']:>5}{row['reached']:>5}/{row['seeds']:<3}"
                  f"{row['cost_vs_static']:>8.2f}{'-' if worst is None else f'{worst:.2f}':>8}"
                  f"{row['time_vs_static']:>8.2f}{row['env_steps_vs_static']:>8.2f}")
    print_bill(summary.get("bill") or [])
    for k, v in summary["bars"].items():
        print(f"  {k}: {v:.3f}" if isinstance(v, float) else f"  {k}: {v}")


def _iv_text(interval: dict[str, Any] | None, estimate: float | None) -> str:
    if estimate is None:
        return "-"
    if not interval:
        return f"{estimate:.3f}"
    return f"{estimate:.3f} [{interval['low']:.3f}, {interval['high']:.3f}]"


def print_bill(bill: list[dict[str, Any]]) -> None:
    """The bill table: each method's sums over the seeds against the static default's on the same seeds."""
    if not bill:
        return
    print("the bill against the static default on the same seeds: ratio of sums (time: of means), "
          "95% bootstrap interval over seeds; static_repeat is the control (the same runs again: the clock's noise)")
    print(f"  {'method':<30}{'reached':>9}{'sum cost USD':>14}  {'cost':<22}{'time':<22}{'env steps':<22}")
    for row in bill:
        name = row["method"] + (" (control)" if row["control"] else "")
        cells = [_iv_text(row.get(f"{n}_sum_ratio_interval"), row.get(f"{n}_sum_ratio")) for n, _ in BILL_KEYS]
        total = row.get("sum_cost_usd")
        print(f"  {name:<30}{row['reached']:>5}/{row['seeds']:<3}{'-' if total is None else f'{total:.6f}':>14}  "
              + "".join(f"{c:<22}" for c in cells))


def _load_grid(path: Path, env: str, seeds: list[int]) -> tuple[list[dict[str, Any]], str]:
    """The grid of an earlier run of the same env, on ``seeds`` (the grid does not depend on
    Seraph's code: it is full training runs of fixed shapes through the trainer)."""
    import json

    try:
        earlier = next(e for e in json.loads(path.read_text())["envs"] if e["env"] == env)
    except (OSError, ValueError, KeyError, StopIteration):
        raise SystemExit(f"--grid-from {path}: no readable result for {env} in it") from None
    grid = [g for g in earlier["grid"] if g["seed"] in seeds]
    if not grid:
        raise SystemExit(f"--grid-from {path}: its {env} grid has none of the seeds {seeds}")
    return grid, f"{path} (measured {earlier.get('measured_at', 'earlier')}, seeds {sorted({g['seed'] for g in grid})})"


def oracle_candidates(grid: list[dict[str, Any]], top: int) -> list[RunShape]:
    """The union of the grid's ``top`` best shapes for cost and for speed."""
    from optimizers.rl_baselines.grid import ranked_shapes

    shapes: list[RunShape] = []
    for objective in ("cost", "speed"):
        for o in ranked_shapes(grid, objective)[:top]:
            s = RunShape(**o["config"])
            if s not in shapes:
                shapes.append(s)
    return shapes


def _use_grid(res: dict[str, Any], grid: list[dict[str, Any]], source: str, top: int, out_of_sample: bool = False) -> None:
    from optimizers.rl_baselines.grid import oracle

    res["grid"] = grid
    res["grid_source"] = source
    res["oracle"] = {o: oracle(grid, o) for o in ("cost", "speed")}
    again = res.get("oracle_remeasured_runs")
    if again:
        res["oracle_as_in_grid"] = res["oracle"]
        res["oracle"] = {o: oracle(again, o) for o in ("cost", "speed")}
        for o in res["oracle"].values():
            if o:
                o["rule"] = (
                    f"best median of the grid's top {top} shapes per objective, re-measured in this run "
                    + ("on other seeds than the grid's that chose them (out of sample)" if out_of_sample else "(same seeds)")
                )


def rescore(path: Path) -> int:
    """Print a saved result's table and bars as this code summarises them (no training)."""
    import json

    try:
        envs = json.loads(path.read_text())["envs"]
    except (OSError, ValueError, KeyError, TypeError) as exc:
        raise SystemExit(f"--rescore {path}: not a readable seraph benchmark result ({exc})") from None
    for res in envs:
        print_table(res["env"], summarise(res), res["oracle"])
    return 0


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--envs", default="CartPole-v1,LunarLander-v3")
    ap.add_argument("--seeds", default="0,1,2")
    ap.add_argument("--quick", action="store_true", help="small grid (7 shapes), memory sweep for cost only")
    ap.add_argument("--max-steps", type=int, default=None)
    ap.add_argument("--methods", default=",".join(METHODS), help=f"subset of {','.join(METHODS)}")
    ap.add_argument(
        "--grid-from", type=Path, default=None,
        help="take the grid (and so the oracle) from an earlier run's JSON instead of running it again; "
        "the result says so (grid_source)",
    )
    ap.add_argument(
        "--grid-shapes", default=None,
        help="the grid's shapes as ACTORSxMEMORY_MBxBATCH,... (default: the built-in grid for the env)",
    )
    ap.add_argument(
        "--oracle-top", type=int, default=0,
        help="with --grid-from: re-run the grid's best K shapes per objective here, side by side, and take "
        "the oracle from those runs (default 0: the earlier grid's figures as they are)",
    )
    ap.add_argument(
        "--grid-seeds", default=None,
        help="with --grid-from: the grid's seeds that choose the oracle's shapes (default: --seeds). Other seeds "
        "than --seeds, with --oracle-top 1, give an out-of-sample oracle: no best-of-k on the seeds it is judged on",
    )
    ap.add_argument("--steps-per-env", type=int, default=DEFAULT_STEPS_PER_ENV,
                    help="every run but the static default's splits its batches into envs of about N steps "
                    f"(PPOConfig.steps_per_env; default {DEFAULT_STEPS_PER_ENV}, the tuner's; 0: one env per actor)")
    ap.add_argument("--fresh-only", action="store_true",
                    help="run Seraph with a fresh profile only, without the cached-profile twin of each run "
                    "(halves Seraph's share of a many-seed run; the cached-profile bars are then not reported)")
    ap.add_argument("--objectives", default="cost,speed", help="Seraph's objectives to run: cost, speed or both")
    ap.add_argument("--ignore-references", action="store_true",
                    help="Seraph plans as for an env without reference runs (committed or built in): the layout "
                    "and batch are then decided online, on the run's own rollouts")
    ap.add_argument("--json-out", type=Path, default=None)
    ap.add_argument("--rescore", type=Path, default=None,
                    help="re-summarise a saved result JSON with this code's summary (no training) and exit")
    args = ap.parse_args(argv)
    if args.rescore is not None:
        return rescore(args.rescore)
    if args.steps_per_env < 0:
        ap.error(f"--steps-per-env must be >= 0 (0 = one env per actor), got {args.steps_per_env}")
    if args.oracle_top < 0 or (args.oracle_top and args.grid_from is None):
        ap.error("--oracle-top K needs K >= 0 and --grid-from FILE (the grid whose best shapes are re-run)")
    grid_shapes = None
    if args.grid_shapes:
        try:
            grid_shapes = [RunShape(*(int(x) for x in g.split("x"))) for g in args.grid_shapes.split(",") if g]
        except (TypeError, ValueError):
            ap.error(f"--grid-shapes takes ACTORSxMEMORY_MBxBATCH,... (e.g. 4x1769x1024), got {args.grid_shapes!r}")
    envs, seeds = envs_and_seeds(ap, args)
    try:
        grid_seeds = seeds if args.grid_seeds is None else [int(s) for s in args.grid_seeds.split(",") if s]
    except ValueError:
        ap.error(f"--grid-seeds must be comma-separated integers, got {args.grid_seeds!r}")
    if args.grid_seeds is not None and args.grid_from is None:
        ap.error("--grid-seeds needs --grid-from FILE (the grid whose runs on those seeds choose the oracle)")
    if sorted(grid_seeds) != sorted(seeds) and not args.oracle_top:
        ap.error("--grid-seeds other than --seeds needs --oracle-top K: the oracle must be re-run on --seeds to compare")
    out_of_sample = not set(grid_seeds) & set(seeds)
    methods = tuple(m for m in args.methods.split(",") if m)
    bad = [m for m in methods if m not in METHODS]
    if bad:
        ap.error(f"unknown method(s) {bad}; allowed: {', '.join(METHODS)}")
    objectives = tuple(o for o in args.objectives.split(",") if o)
    if not objectives or set(objectives) - {"cost", "speed"}:
        ap.error(f"--objectives takes cost, speed or cost,speed, got {args.objectives!r}")
    results = []
    for env in envs:
        partial = None if args.json_out is None else args.json_out.with_suffix(f".{env}.partial.json")
        earlier = None if args.grid_from is None else _load_grid(args.grid_from, env, grid_seeds)
        remeasure = oracle_candidates(earlier[0], args.oracle_top) if earlier and args.oracle_top else []
        res = run_env(env, seeds, args.quick, args.max_steps, partial, methods, grid_shapes, remeasure, args.steps_per_env,
                      cached_twins=not args.fresh_only, ignore_references=args.ignore_references, objectives=objectives)
        if earlier is not None:
            _use_grid(res, *earlier, args.oracle_top, out_of_sample)
        res["summary"] = summarise(res)
        print_table(env, res["summary"], res["oracle"])
        results.append(res)
        if args.json_out:
            from core.results import write_json

            write_json(args.json_out, {"benchmark": "seraph", "quick": args.quick, "seeds": seeds,
                                       "ignore_references": args.ignore_references,
                                       "grid_seeds": grid_seeds, "envs": results})
    return 0


if __name__ == "__main__":
    sys.exit(main())
