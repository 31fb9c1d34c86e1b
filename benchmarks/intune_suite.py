"""InTune on the pipeline suite, side by side with the other optimizers, per pipeline and overall.

    # simulated (every figure labelled simulated): the whole suite, 3 seeds, a few minutes
    python -m benchmarks.intune_suite --simulate --seeds 3 --json-out runs/intune-suite-sim.json

    # measured: on a quiet machine, under the benchmark lock (long: a grid per pipeline)
    flock /tmp/trainwise-bench.lock python -m benchmarks.intune_suite --seeds 3 --budget-s 180 \\
        --json-out runs/intune-suite-live.json

Optimizers, each with the same budget: ``intune`` (the agent ranks moves, with the model),
``intune-model`` (the same tuner with the agent switched off: the model alone ranks moves),
``hillclimb``, ``optuna``, ``autotune`` (tf.data AUTOTUNE: live the real one, simulated the
model of its HILL_CLIMB on the true costs) and ``plumber`` (the LP on the calibration). The
reference is the exhaustive grid's best configuration.

**Simulated** (``--simulate``): each seed draws the pipeline's *truth* from its simulator model
with randomised stage costs (log-normal, ``--cost-spread``) and a random core contention, and
the *belief* the model-based optimizers get from it the way a calibration errs: every cost off by
a log-normal factor (``--calibration-error``), without the knob effects of kind ``other`` and
``buffer``, without contention. Measurements carry multiplicative noise (``--noise``); a trial
costs ``--trial-s`` simulated seconds and a calibration ``--calibrate-s`` (paid by ``intune``,
``intune-model`` and ``plumber`` out of the same budget). A pick is scored noise-free on the truth.

**Measured** (default): for each pipeline, the grid is measured (short search windows), every
optimizer tunes through :func:`optimizers.tuning.tune_pipeline` with the budget, then the picks,
AUTOTUNE and the grid's best are measured again side by side in one worker, ``--rounds`` rounds
in turn, and compared by the median.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable

import numpy as np

OPTIMIZERS = ("intune", "intune-model", "hillclimb", "optuna", "autotune", "plumber")
MODEL_BASED = ("intune", "intune-model", "plumber")


@dataclass(frozen=True)
class SimSettings:
    """The simulated protocol (module doc)."""

    budget_s: float = 180.0
    trial_s: float = 4.5
    calibrate_s: float = 40.0
    noise: float = 0.06
    calibration_error: float = 0.25
    cost_spread: float = 0.3
    vcpus: int = 2


@dataclass(frozen=True)
class SimCase:
    member: Any
    node: Any
    space: Any
    truth: Any
    belief: Any
    seed: int


# ---------------------------------------------------------------------------------------------
# simulated
# ---------------------------------------------------------------------------------------------
def sim_case(member: Any, seed: int, s: SimSettings) -> SimCase:
    """A seeded case: the truth with randomised costs, and a calibration-like belief of it."""
    from ingestion.pipelines import suite_node
    from optimizers.intune.env import calibration_like, randomised

    node = suite_node(s.vcpus)
    space = member.space(node)
    rng = np.random.default_rng([seed, sum(member.name.encode())])
    truth = randomised(member.model(space), rng, s.cost_spread)
    return SimCase(member, node, space, truth, calibration_like(truth, rng, s.calibration_error), seed)


def sim_oracle(case: SimCase) -> tuple[dict[str, int], float]:
    """The grid's best configuration on the truth (noise-free), skipping failures."""
    best = max(case.space.grid(), key=lambda c: case.member.simulate(case.truth, c, case.node).score)
    return best, case.member.simulate(case.truth, best, case.node).rows_per_s


def autotune_model(case: SimCase) -> Any:
    """AUTOTUNE on the simulator: the model of its HILL_CLIMB on the true costs, with each knob
    that caps a stage's threads (interleave's cycle length) at tf.data's AUTOTUNE choice, the
    node's core count (as far as the knob's values go), so it never picks a configuration that
    tf.data rejects (the real AUTOTUNE sets both)."""
    from optimizers.baselines._fixed import FixedConfigs
    from optimizers.baselines.autotune_model import make_autotune_model_optimizer

    caps = {k.limited_by for k in case.space.cpu_knobs if k.limited_by}
    space = case.space
    if caps:
        from dataclasses import replace as dc_replace

        fixed = {name: max(v for v in space.knob(name).values if v <= case.node.vcpus) for name in caps}
        space = dc_replace(space, knobs=tuple(dc_replace(k, values=(fixed[k.name],), default=fixed[k.name])
                                              if k.name in fixed else k for k in space.knobs))
    opt = make_autotune_model_optimizer(space, case.node, case.truth)
    return FixedConfigs("autotune", [opt.ask()])


def _sim_optimizer(name: str, case: SimCase, clock: Callable[[], float], budget_s: float) -> Any:
    from optimizers.baselines.hillclimb import HillClimb
    from optimizers.baselines.optuna_search import OptunaSearch
    from optimizers.baselines.plumber import make_plumber_optimizer
    from optimizers.intune.agent import MaskedDQN
    from optimizers.intune.pretrain import PRETRAINED
    from optimizers.intune.settings import InTuneSettings
    from optimizers.intune.optimizer import InTuneOptimizer

    if name in ("intune", "intune-model"):
        settings = InTuneSettings(use_agent=name == "intune")
        return InTuneOptimizer(case.space, case.node, case.belief, MaskedDQN.load(PRETRAINED), settings,
                               time_budget_s=budget_s, clock=clock)
    if name == "hillclimb":
        return HillClimb(case.space, seed=case.seed)
    if name == "optuna":
        return OptunaSearch(case.space, seed=case.seed)
    if name == "autotune":
        return autotune_model(case)
    if name == "plumber":
        return make_plumber_optimizer(case.space, case.node, case.belief)
    raise ValueError(name)


def sim_run(name: str, case: SimCase, s: SimSettings) -> dict[str, Any]:
    """One optimizer on one case under the simulated budget; its pick scored on the truth."""
    from ingestion.simulator import memory_mb
    from optimizers.asktell import run
    from optimizers.tuning import recommendation

    t = [s.calibrate_s if name in MODEL_BASED else 0.0]
    clock = lambda: t[0]  # noqa: E731
    noise = np.random.default_rng([case.seed, 99, sum(name.encode())])

    def evaluate(config: dict[str, int]) -> Any:
        t[0] += s.trial_s
        return case.member.simulate(case.truth, config, case.node, noise=s.noise, rng=noise)

    opt = _sim_optimizer(name, case, clock, s.budget_s - t[0])
    result = run(opt, evaluate, time_budget_s=s.budget_s - t[0], clock=clock)
    failed = sum(tr.measurement.failed for tr in result.trials)
    if result.best_config is None or result.best is None or result.best.failed:
        return {"config": None, "rows_per_s": 0.0, "trials": len(result.trials), "failed": failed,
                "tuning_s": t[0], "peak_mb": 0.0, "oom": True}
    config, _ = recommendation(opt, result)
    final = case.member.simulate(case.truth, config, case.node)
    history = [{"config": tr.config, "rows_per_s": tr.measurement.rows_per_s, "elapsed_s": tr.elapsed_s,
                "oom": tr.measurement.failed} for tr in result.trials]
    return {"config": config, "rows_per_s": final.rows_per_s, "trials": len(result.trials), "failed": failed,
            "tuning_s": round(t[0], 1), "search_s": round(history[-1]["elapsed_s"], 1) if history else 0.0,
            "peak_mb": round(memory_mb(case.truth, config)[0], 1), "oom": final.failed,
            "stopped_by": getattr(opt, "finished", None) or result.stopped_by, "history": _trial_log(history)}


def simulate_suite(names: list[str], optimizers: list[str], seeds: int, s: SimSettings,
                   log: Callable[[str], None] = lambda m: None) -> dict[str, Any]:
    """Every optimizer on every pipeline and seed, simulated; per-run rows (see :func:`summarise`)."""
    import torch

    from ingestion.pipelines import member

    torch.set_num_threads(1)
    runs = []
    for name in names:
        m = member(name)
        for seed in range(seeds):
            case = sim_case(m, seed, s)
            oracle_config, oracle_x = sim_oracle(case)
            auto = sim_run("autotune", case, s)["rows_per_s"]
            for opt in optimizers:
                r = sim_run(opt, case, s)
                runs.append({"pipeline": name, "role": m.role, "seed": seed, "optimizer": opt,
                             "grid_best_rows_per_s": oracle_x, "autotune_rows_per_s": auto,
                             "vs_grid": r["rows_per_s"] / oracle_x, "vs_autotune": r["rows_per_s"] / max(auto, 1e-9), **r})
            log(f"{name:<14} seed {seed}: " + "  ".join(
                f"{r['optimizer']} {r['vs_grid']:.2f}" for r in runs if r["pipeline"] == name and r["seed"] == seed))
    return {"label": "simulated", "settings": s.__dict__, "runs": runs}


# ---------------------------------------------------------------------------------------------
# measured
# ---------------------------------------------------------------------------------------------
def _calibration(spec: Any, node: Any, budget_s: float) -> Callable[[], Any]:
    def calibrate_now() -> Any:
        from ingestion.calibrate import calibrate
        from optimizers.intune.settings import InTuneSettings

        return calibrate(spec, node, time_budget_s=InTuneSettings().calibrate_share * budget_s)

    return calibrate_now


def live_optimizer(name: str, job: Any) -> Any:
    """What :func:`tune_pipeline` gets: a registry name, or the model-only InTune built here for ``job``."""
    if name != "intune-model":
        return name
    from optimizers.intune import InTuneSettings, make_intune_optimizer

    return make_intune_optimizer(job.spec, job.node, budget=job.budget, seed=job.seed, save_agent=False,
                                 calibration=job.load_calibration(), settings=InTuneSettings(use_agent=False))


def side_by_side(spec: Any, node: Any, configs: dict[str, dict[str, int]], rounds: int) -> dict[str, dict[str, float]]:
    """Each distinct configuration measured ``rounds`` times in turn in one worker (final
    protocol, :func:`benchmarks.ingestion_live.side_by_side`): the median rows/s and the
    largest peak memory of each name; names that picked the same configuration share it."""
    from benchmarks.ingestion_live import side_by_side as measure_side_by_side

    final = measure_side_by_side(spec, node, configs, rounds)
    return {k: {"rows_per_s": f["rows_per_s"], "peak_mb": f["peak_rss_mb"], "oom": f["oom"]} for k, f in final.items()}


def _trial_log(history: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """A tuning run's trials, in order, as the result file keeps them (what a pick is traced to)."""
    return [{"config": h["config"], "rows_per_s": round(h["rows_per_s"]), "elapsed_s": round(h["elapsed_s"], 1),
             **({"failure": h.get("failure") or "oom"} if h["oom"] or "failure" in h else {})} for h in history]


def live_pipeline(m: Any, data_root: Path, optimizers: list[str], seeds: int, budget_s: float, rounds: int,
                  grid: bool, log: Callable[[str], None]) -> list[dict[str, Any]]:
    """One pipeline, measured: grid (optional), every optimizer and seed, then side by side."""
    from ingestion.node import this_machine
    from ingestion.pipelines import suite_node
    from optimizers.baselines.autotune import autotune_config
    from optimizers.tuning import IngestJob, NoRunningConfiguration, TuningOptions, tune_pipeline

    node = suite_node(this_machine().vcpus)
    spec = m.spec(m.generate(data_root / m.name, 0), node)
    picks: dict[str, dict[str, int]] = {"autotune": autotune_config(spec)}
    if grid:
        g = tune_pipeline(IngestJob.create(spec, node, time_budget_s=10 * 3600, final=None), "grid",
                          TuningOptions(progress=False))
        picks["grid"] = g.config
        log(f"{m.name}: grid best {g.config} ({g.search['trials']} configurations)")
    tuned = []
    for opt in (o for o in optimizers if o != "autotune"):
        for seed in range(seeds):
            t0 = time.monotonic()
            job = IngestJob.create(spec, node, time_budget_s=budget_s, seed=seed, final=None,
                                   calibration=_calibration(spec, node, budget_s))
            try:
                r = tune_pipeline(job, live_optimizer(opt, job), TuningOptions(progress=False))
            except NoRunningConfiguration as exc:  # a run that found nothing is a result: it scores 0
                config, history, stopped_by, error = None, exc.history, "found no configuration that runs", str(exc)
            else:
                config, history, stopped_by, error = r.config, r.search["history"], r.search["stopped_by"], None
                picks[f"{opt}/{seed}"] = config
            tuned.append({"optimizer": opt, "seed": seed, "config": config, "trials": len(history),
                          "failed": sum(1 for h in history if h["oom"] or "failure" in h),
                          "tuning_s": round(time.monotonic() - t0, 1),
                          "search_s": round(history[-1]["elapsed_s"], 1) if history else 0.0,
                          "stopped_by": stopped_by, "history": _trial_log(history), **({"error": error} if error else {})})
            log(f"{m.name}: {opt} seed {seed}: {config} in {tuned[-1]['tuning_s']} s, {len(history)} trials"
                + (f" ({error})" if error else ""))
    final = side_by_side(spec, node, picks, rounds)
    nothing = {"rows_per_s": 0.0, "peak_mb": 0.0, "oom": True}
    ref = final.get("grid", {}).get("rows_per_s")
    auto = final["autotune"]["rows_per_s"]
    rows = [{"pipeline": m.name, "role": m.role, "seed": 0, "optimizer": "autotune", "config": picks["autotune"],
             "trials": 1, "failed": 0, "tuning_s": 0.0, **final["autotune"]}]
    rows += [{"pipeline": m.name, "role": m.role, **t, **final.get(f"{t['optimizer']}/{t['seed']}", nothing)}
             for t in tuned]
    for row in rows:
        row.update(grid_best_rows_per_s=ref, autotune_rows_per_s=auto, vs_autotune=row["rows_per_s"] / max(auto, 1e-9),
                   vs_grid=None if not ref else row["rows_per_s"] / ref)
    return rows


# ---------------------------------------------------------------------------------------------
# summary and table
# ---------------------------------------------------------------------------------------------
def _stats(values: list[float]) -> dict[str, float]:
    med = statistics.median(values)
    return {"median": med, "min": min(values), "max": max(values),
            "spread": (max(values) - min(values)) / med if med else 0.0}


def _key(config: dict[str, int]) -> tuple:
    return tuple(sorted(config.items()))


def pooled_samples(runs: list[dict[str, Any]]) -> dict[str, dict[tuple, list[float]]]:
    """Per pipeline, every search measurement of each configuration in every run's trials (the
    good configurations are measured by several optimizers and seeds, so their pooled median is
    steadier than any one run's measurement)."""
    samples: dict[str, dict[tuple, list[float]]] = {}
    for r in runs:
        for h in r.get("history") or []:
            if "failure" not in h:
                samples.setdefault(r["pipeline"], {}).setdefault(_key(h["config"]), []).append(h["rows_per_s"])
    return samples


def reach_s(run: dict[str, Any], levels: dict[tuple, float], target: float) -> float | None:
    """When a run first measured a configuration whose pooled level is at least ``target`` (its
    time to a good configuration), counted from the start of tuning (its set-up, such as a
    calibration, included), or None if it never did."""
    setup_s = max(0.0, run["tuning_s"] - run.get("search_s", run["tuning_s"]))
    for h in run.get("history") or []:
        if "failure" not in h and levels.get(_key(h["config"]), 0.0) >= target:
            return round(setup_s + float(h["elapsed_s"]), 1)
    return None


def time_to_quality(runs: list[dict[str, Any]], share: float = 0.95, min_samples: int = 3) -> dict[str, Any]:
    """Per pipeline and optimizer, how soon each run first measured a configuration within
    ``1 - share`` of the best known one, judged by pooled search measurements
    (:func:`pooled_samples`, a configuration's level is their median): the best known level is
    the highest level among the configurations measured at least ``min_samples`` times. Runs
    without a trial history (AUTOTUNE) are left out."""
    traced: dict[str, dict[str, list[dict[str, Any]]]] = {}
    for r in runs:
        if r.get("history"):
            traced.setdefault(r["pipeline"], {}).setdefault(r["optimizer"], []).append(r)
    out: dict[str, Any] = {}
    for pipeline, per in pooled_samples(runs).items():
        levels = {k: statistics.median(v) for k, v in per.items()}
        steady = [levels[k] for k, v in per.items() if len(v) >= min_samples]
        if not steady:
            continue
        target = share * max(steady)
        for opt, opt_runs in sorted(traced[pipeline].items()):
            times = [reach_s(r, levels, target) for r in opt_runs]
            reached = [t for t in times if t is not None]
            out.setdefault(pipeline, {})[opt] = {"reached": len(reached), "runs": len(times),
                                                 "median_s": statistics.median(reached) if reached else None,
                                                 "max_s": max(reached) if reached else None}
    return {"share": share, "min_samples": min_samples, "per_pipeline": out}


def summarise(runs: list[dict[str, Any]]) -> dict[str, Any]:
    """Per pipeline x optimizer and overall (all, held-out): ratios to the grid and AUTOTUNE,
    with their median, min, max and spread over seeds; tuning time, trials, failures, memory."""
    keys = sorted({(r["pipeline"], r["optimizer"]) for r in runs})
    per: dict[str, dict[str, Any]] = {}
    for pipeline, opt in keys:
        rs = [r for r in runs if r["pipeline"] == pipeline and r["optimizer"] == opt]
        per.setdefault(pipeline, {})[opt] = {
            "vs_grid": _stats([r["vs_grid"] for r in rs]) if rs[0]["vs_grid"] is not None else None,
            "vs_autotune": _stats([r["vs_autotune"] for r in rs]),
            "tuning_s": statistics.median(r["tuning_s"] for r in rs), "trials": statistics.median(r["trials"] for r in rs),
            "failed": sum(r["failed"] for r in rs), "peak_mb": max(r["peak_mb"] for r in rs),
            "oom_picks": sum(bool(r["oom"]) for r in rs), "seeds": len(rs), "role": rs[0]["role"],
        }
    overall: dict[str, dict[str, Any]] = {}
    for scope, pick in (("all", lambda r: True), ("heldout", lambda r: r["role"] == "heldout")):
        for opt in sorted({r["optimizer"] for r in runs}):
            rs = [r for r in runs if r["optimizer"] == opt and pick(r) and r["vs_grid"] is not None]
            if rs:
                overall.setdefault(scope, {})[opt] = {"vs_grid": _stats([r["vs_grid"] for r in rs]),
                                                      "vs_autotune": _stats([r["vs_autotune"] for r in rs]),
                                                      "failed": sum(r["failed"] for r in rs), "runs": len(rs)}
    headroom = {p: statistics.median(r["grid_best_rows_per_s"] / max(r["autotune_rows_per_s"], 1e-9)
                                     for r in runs if r["pipeline"] == p and r["grid_best_rows_per_s"])
                for p in per if any(r["grid_best_rows_per_s"] for r in runs if r["pipeline"] == p)}
    return {"per_pipeline": per, "overall": overall, "headroom_grid_vs_autotune": headroom,
            "time_to_quality": time_to_quality(runs)}


def table(summary: dict[str, Any], label: str) -> str:
    lines = [f"| pipeline | optimizer | vs grid best (median, min-max) | vs AUTOTUNE | tuning s | trials | failed | peak MB | [{label}]",
             "|---|---|---|---|---|---|---|---|"]
    for pipeline, opts in summary["per_pipeline"].items():
        for opt, f in opts.items():
            g = f["vs_grid"]
            grid = f"{g['median']:.3f} ({g['min']:.2f}-{g['max']:.2f})" if g else "-"
            lines.append(f"| {pipeline} ({f['role']}) | {opt} | {grid} | {f['vs_autotune']['median']:.2f}x | "
                         f"{f['tuning_s']:.0f} | {f['trials']:.0f} | {f['failed']} | {f['peak_mb']:.0f} |")
    for scope, opts in summary["overall"].items():
        for opt, f in opts.items():
            g = f["vs_grid"]
            lines.append(f"| **{scope}** | {opt} | {g['median']:.3f} ({g['min']:.2f}-{g['max']:.2f}) | "
                         f"{f['vs_autotune']['median']:.2f}x | | {f['runs']} runs | {f['failed']} | |")
    return "\n".join(lines)


def _in_suite_order(optimizers: set[str]) -> list[str]:
    """Optimizer names in the order of ``OPTIMIZERS`` (a table's columns), any others after them."""
    return sorted(optimizers, key=lambda o: (o not in OPTIMIZERS, OPTIMIZERS.index(o) if o in OPTIMIZERS else 0))


def matrix(summary: dict[str, Any], label: str) -> str:
    """Pipelines x optimizers: the median ratio to the grid's best (the lowest seed's in brackets),
    then the overall rows; the headroom column is the grid's best over AUTOTUNE."""
    opts = _in_suite_order({o for per in summary["per_pipeline"].values() for o in per})
    lines = [f"| vs grid best, median (min) [{label}] | " + " | ".join(opts) + " | grid / AUTOTUNE |",
             "|---|" + "---|" * (len(opts) + 1)]

    def cell(f: dict[str, Any] | None) -> str:
        g = f and f["vs_grid"]
        return f"{g['median']:.2f} ({g['min']:.2f})" if g else "-"

    for pipeline, per in summary["per_pipeline"].items():
        role = next(iter(per.values()))["role"]
        head = summary["headroom_grid_vs_autotune"].get(pipeline)
        lines.append(f"| {pipeline} ({role}) | " + " | ".join(cell(per.get(o)) for o in opts)
                     + (f" | {head:.2f}x |" if head else " | - |"))
    for scope, per in summary["overall"].items():
        lines.append(f"| **{scope}** | " + " | ".join(cell(per.get(o)) for o in opts) + " | |")
    return "\n".join(lines)


def reach_table(summary: dict[str, Any], label: str) -> str:
    """Pipelines x optimizers: the median time (s, set-up included) to a configuration within
    ``1 - share`` of the best known one, and how many runs got there (``time_to_quality``)."""
    ttq = summary["time_to_quality"]
    per = ttq["per_pipeline"]
    opts = _in_suite_order({o for p in per.values() for o in p})
    lines = [f"| s to within {1 - ttq['share']:.0%} of the best known, median (runs there) [{label}] | "
             + " | ".join(opts) + " |", "|---|" + "---|" * len(opts)]

    def cell(f: dict[str, Any] | None) -> str:
        if f is None:
            return "-"
        if f["median_s"] is None:
            return f"never (0/{f['runs']})"
        return f"{f['median_s']:.0f} ({f['reached']}/{f['runs']})"

    for pipeline, row in per.items():
        lines.append(f"| {pipeline} | " + " | ".join(cell(row.get(o)) for o in opts) + " |")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    from core.errors import UserError
    from ingestion.pipelines import NAMES

    p = argparse.ArgumentParser(description="InTune on the pipeline suite, side by side (see the module doc)")
    p.add_argument("--simulate", action="store_true", help="on the simulator (figures labelled simulated)")
    p.add_argument("--pipelines", default=",".join(NAMES), help=f"comma-separated, of: {', '.join(NAMES)}")
    p.add_argument("--optimizers", default=",".join(OPTIMIZERS), help=f"comma-separated, of: {', '.join(OPTIMIZERS)}")
    p.add_argument("--seeds", type=int, default=3)
    p.add_argument("--budget-s", type=float, default=180.0, help="time budget per tuning run (simulated or measured)")
    p.add_argument("--vcpus", type=int, default=2, help="simulated node's vCPUs (--simulate only)")
    p.add_argument("--noise", type=float, default=SimSettings.noise)
    p.add_argument("--calibration-error", type=float, default=SimSettings.calibration_error)
    p.add_argument("--rounds", type=int, default=3, help="side-by-side rounds (measured only)")
    p.add_argument("--no-grid", action="store_true", help="measured only: skip the grid (no vs-grid ratios)")
    p.add_argument("--data-root", type=Path, default=None, help="where the suite's data is generated (measured)")
    p.add_argument("--json-out", default=None)
    args = p.parse_args(argv)
    try:
        names = [n for n in args.pipelines.split(",") if n]
        opts = [o for o in args.optimizers.split(",") if o]
        bad = [n for n in names if n not in NAMES] + [o for o in opts if o not in OPTIMIZERS]
        if bad or args.seeds < 1 or args.budget_s <= 0:
            raise UserError(f"--pipelines/--optimizers: unknown {bad}; --seeds >= 1 and --budget-s > 0 "
                            f"(pipelines: {', '.join(NAMES)}; optimizers: {', '.join(OPTIMIZERS)})")
        result = run_benchmark(args, names, opts)
    except UserError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    print(table(result["summary"], result["label"]))
    print()
    print(matrix(result["summary"], result["label"]))
    print()
    print(reach_table(result["summary"], result["label"]))
    if args.json_out:
        from core.results import write_json

        write_json(args.json_out, result)
    return 0


def run_benchmark(args: argparse.Namespace, names: list[str], opts: list[str]) -> dict[str, Any]:
    from benchmarks._common import machine_state

    log = lambda msg: print(msg, file=sys.stderr, flush=True)  # noqa: E731
    before = machine_state()
    if args.simulate:
        s = SimSettings(budget_s=args.budget_s, noise=args.noise, calibration_error=args.calibration_error, vcpus=args.vcpus)
        result = simulate_suite(names, opts, args.seeds, s, log)
    else:
        from core.paths import cache_dir

        from ingestion.pipelines import member

        root = args.data_root or cache_dir("suite-data")
        runs = []
        for name in names:
            runs += live_pipeline(member(name), Path(root), opts, args.seeds, args.budget_s, args.rounds,
                                  not args.no_grid, log)
        result = {"label": "measured", "budget_s": args.budget_s, "rounds": args.rounds, "runs": runs}
    return {"benchmark": "intune-suite", **result, "summary": summarise(result["runs"]),
            "machine_before": before, "machine_after": machine_state()}


if __name__ == "__main__":
    raise SystemExit(main())
