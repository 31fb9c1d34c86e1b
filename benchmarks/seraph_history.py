"""Seraph across the runs of one job: what a user pays over a series of seeds, against the static default.

    flock /tmp/trainwise-bench.lock .venv/bin/python -m benchmarks.seraph_history \\
        --envs Acrobot-v1,benchmarks.beacon_env:Beacon-v0,Pendulum-v1 --seeds 0-9 --objectives cost,speed \\
        --ignore-references --static-repeat --json-out runs/seraph-history.json

    flock /tmp/trainwise-bench.lock .venv/bin/python -m benchmarks.seraph_history --mode sweep \\
        --envs benchmarks.beacon_env:BeaconContinuous-v0 --seeds 0-5 --objectives cost --json-out runs/seraph-sweep.json

    .venv/bin/python -m benchmarks.seraph_history --rescore runs/seraph-history.json

**Series** (the default mode): for each env and objective, in one fresh ``TRAINWISE_HOME``, ``trainwise
rl tune`` trains seed 1, then seed 2, ... one after another, so each run has the history of the
runs before it (and the profile they cached), as a user's own runs of one job would. Beside each
tune run, in a home of its own, ``trainwise rl train`` trains the same seed at the static
default's shape (``optimizers.seraph.baseline.STATIC_DEFAULT_CONFIG``: 2 actors x 1,769 MB, batch
4,000, env slots of 2,000 steps), with the same step cap and so the same learning-rate schedule
(``optimizers.seraph.pilot.workload_for``: three times the env preset's). ``--static-repeat``
trains the static default once more per seed: the same trajectory twice, so the ratio of the two
is the modelled clock's run-to-run noise, shown beside the tuner's ratios. Reported per run k:
the run's arm and configuration as its JSON names them, its cost and time against the static run
of the same seed, and the cumulative bill (tune's cost over runs 1..k over the static default's);
then the sum over runs 6-10 and the median time over runs 4-10 against the static default's,
with paired bootstrap intervals over the seeds in the window (they show the seeds' spread; the
series' path through its history is one path).

**Sweep**: ``trainwise rl sweep`` trains every seed in one command (in a fresh home), against
one static ``rl train`` per seed: the sweep's total (everything it paid, pilots and probes
included) over the static runs' sum, and whether every seed reached the target.

Every run is a subprocess of the CLI, as a user runs it, so the benchmark reads only the CLI's
JSON (``--json-out``), not the tuner's internals. ``--ignore-references`` runs the tuner as for
an env without committed reference runs (the context ``benchmarks.seraph --ignore-references``
uses, entered in the subprocess): the job's own history is then its only evidence. Time and cost
are MODELLED (the local Lambda emulator's clock and the price table); env steps are counted;
wall time is MEASURED (the whole subprocess) and shown only beside them.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from benchmarks._common import (
    bootstrap_interval, machine_state, median_ratio, print_table, progress, sum_ratio, write_result,
)

REPO = Path(__file__).resolve().parents[1]

#: the issue's windows: the sum over runs 6-10 (cost), the median over runs 4-10 (time); 1-based
LATE_COST_WINDOW = (6, 10)
LATE_TIME_WINDOW = (4, 10)
#: the issue's bars, reported beside the figures (met only when the series covers the window)
CUMULATIVE_BAR = 1.10
LATE_COST_BAR = {"Pendulum-v1": 1.0}
LATE_COST_BAR_DEFAULT = 0.75
SPEED_TIME_BAR = 0.7
SWEEP_COST_BAR = 0.75

#: run in the subprocess as ``python -c`` when references are ignored: the CLI inside the very
#: context ``benchmarks.seraph --ignore-references`` plans in (``references_ignored``)
_WITHOUT_REFERENCES = (
    "import sys\n"
    "from optimizers.seraph.references import references_ignored\n"
    "from trainwise.cli import main\n"
    "with references_ignored():\n"
    "    sys.exit(main(sys.argv[1:]))\n"
)


def parse_seeds(text: str) -> list[int]:
    """``0-9``, ``0,1,2`` or ``0-2,5``: the seeds in order, each once; ValueError naming the form otherwise."""
    if not text.strip():
        raise ValueError("--seeds is empty: give seeds such as 0-9 or 0,2,5")
    seeds: list[int] = []
    for part in (p.strip() for p in text.split(",")):
        first, dash, last = part.partition("-")
        try:
            lo, hi = int(first), int(last if dash else first)
        except ValueError:
            raise ValueError(f"--seeds takes integers and ranges such as 0-9 or 0,2,5, got {text!r}") from None
        if lo < 0 or hi < lo:
            raise ValueError(f"--seeds range {part!r} must be A-B with 0 <= A <= B")
        seeds += [s for s in range(lo, hi + 1) if s not in seeds]
    return seeds


def seeds_arg(seeds: Sequence[int]) -> str:
    """The seeds as the CLI's ``--seeds`` takes them: ``A-B`` when contiguous."""
    contiguous = list(seeds) == list(range(seeds[0], seeds[0] + len(seeds)))
    return f"{seeds[0]}-{seeds[-1]}" if contiguous else ",".join(map(str, seeds))


#: how many times a CLI run killed by a signal (not failed on its own) is run again
SIGNAL_RETRIES = 2


class CliFailed(RuntimeError):
    """A CLI run that exited non-zero or wrote no readable JSON (the message is one line)."""


@dataclass(frozen=True)
class Cli:
    """Runs ``trainwise`` as a subprocess with this checkout's code, in a given ``TRAINWISE_HOME``.
    Its output goes to ``work/logs/<name>.log``, its JSON to ``work/json/<name>.json``."""

    work: Path
    ignore_references: bool = False
    timeout_s: float | None = None

    def command(self, args: Sequence[str], seraph: bool) -> list[str]:
        if seraph and self.ignore_references:
            return [sys.executable, "-c", _WITHOUT_REFERENCES, *args]
        return [sys.executable, "-m", "trainwise", *args]

    def environment(self, home: Path) -> dict[str, str]:
        env = dict(os.environ)
        env["PYTHONPATH"] = os.pathsep.join([str(REPO), *filter(None, [env.get("PYTHONPATH")])])
        env["TRAINWISE_HOME"] = str(home)
        env["TRAINWISE_RUNS"] = str(self.work / "runs")
        env["TRAINWISE_STATE"] = "local"  # the series' history stays in its own home, never a shared bucket
        return env

    def run(self, args: Sequence[str], home: Path, name: str, seraph: bool = True) -> dict[str, Any]:
        """The run's JSON, with ``wall_s_measured`` (the whole subprocess) and the load before it.
        A run killed by a signal from outside (the machine is shared) is run again, up to
        :data:`SIGNAL_RETRIES` times, and says so (``killed_and_rerun``); any other failure stops."""
        out = self.work / "json" / f"{name}.json"
        log = self.work / "logs" / f"{name}.log"
        out.parent.mkdir(parents=True, exist_ok=True)
        log.parent.mkdir(parents=True, exist_ok=True)
        for attempt in range(SIGNAL_RETRIES + 1):
            load = machine_state()
            start = time.perf_counter()
            code = self._once(args, home, out, log, seraph, name)
            wall = time.perf_counter() - start
            if code >= 0 or attempt == SIGNAL_RETRIES:
                break
            progress(f"{name}: killed by signal {-code} from outside; running it again")
        if code != 0:
            raise CliFailed(f"{name}: exit {code}: {_last_line(log)} (log {log})")
        try:
            result = json.loads(out.read_text())
        except (OSError, ValueError) as exc:
            raise CliFailed(f"{name}: no readable --json-out ({exc}) (log {log})") from None
        return {**result, "wall_s_measured": wall, "loadavg_1m_before": load["loadavg_1m"], "killed_and_rerun": attempt}

    def _once(self, args: Sequence[str], home: Path, out: Path, log: Path, seraph: bool, name: str) -> int:
        with log.open("w") as sink:
            try:
                return subprocess.run(self.command([*args, "--json-out", str(out)], seraph), cwd=REPO,
                                      env=self.environment(home), stdout=sink, stderr=subprocess.STDOUT,
                                      timeout=self.timeout_s, check=False).returncode
            except subprocess.TimeoutExpired:
                raise CliFailed(f"{name}: no result within {self.timeout_s} s (log {log})") from None


def _last_line(log: Path) -> str:
    lines = [ln.strip() for ln in log.read_text(errors="replace").splitlines() if ln.strip()]
    return lines[-1][-300:] if lines else "no output"


# --- what the CLI's JSON says (read defensively: the benchmark keeps working as it grows) -----

def find_key(data: Any, key: str, depth: int = 3) -> Any:
    """The first value of ``key`` in ``data``, breadth first, at most ``depth`` levels of objects down."""
    level = [data]
    for _ in range(depth):
        nxt = []
        for obj in level:
            if isinstance(obj, dict):
                if obj.get(key) is not None:
                    return obj[key]
                nxt += [v for v in obj.values() if isinstance(v, dict)]
        level = nxt
    return None


def arm_of(result: dict[str, Any]) -> Any:
    """The arm a tune run names (``arm`` anywhere near the top of its JSON), else None."""
    arm = find_key(result, "arm")
    if isinstance(arm, dict):
        return arm.get("name") or arm.get("id") or arm
    return arm


def shape_text(config: Any) -> str | None:
    """``{"actors": 2, "memory_mb": 1769, "batch": 4000}`` as ``2x1769x4000`` (else as it is)."""
    if isinstance(config, dict) and {"actors", "memory_mb", "batch"} <= set(config):
        return f"{config['actors']}x{config['memory_mb']}x{config['batch']}"
    return None if config is None else json.dumps(config, sort_keys=True)


def _figures(source: dict[str, Any], what: str) -> dict[str, Any]:
    missing = [k for k in ("reached", "env_steps", "cost_usd", "lambda_time_s") if k not in source]
    if missing:
        raise CliFailed(f"{what}: its JSON has no {', '.join(missing)}")
    return {k: source[k] for k in ("reached", "env_steps", "cost_usd", "lambda_time_s")}


def tune_record(result: dict[str, Any], seed: int, k: int) -> dict[str, Any]:
    """One ``rl tune`` run of a series: its figures (``achieved``), arm and configurations."""
    phases = [p["config"] for p in result.get("phases") or [] if isinstance(p, dict) and isinstance(p.get("config"), dict)]
    return {"k": k, "seed": seed, **_figures(result.get("achieved") or {}, f"rl tune seed {seed}"),
            "arm": arm_of(result), "config": (result.get("plan") or {}).get("config"), "phase_configs": phases,
            "wall_s_measured": result.get("wall_s_measured"), "loadavg_1m_before": result.get("loadavg_1m_before"),
            "killed_and_rerun": result.get("killed_and_rerun", 0)}


def train_record(result: dict[str, Any], seed: int) -> dict[str, Any]:
    return {"seed": seed, **_figures(result, f"rl train seed {seed}"), "wall_s_measured": result.get("wall_s_measured"),
            "loadavg_1m_before": result.get("loadavg_1m_before"), "killed_and_rerun": result.get("killed_and_rerun", 0)}


def sweep_record(result: dict[str, Any]) -> dict[str, Any]:
    """``rl sweep``'s ``runs`` (one per seed) and ``total``, as its JSON contract names them."""
    runs, total = result.get("runs"), result.get("total")
    if not isinstance(runs, list) or not isinstance(total, dict) or "cost_usd" not in total:
        raise CliFailed("rl sweep: its JSON has no 'runs' list or no 'total' with 'cost_usd'")
    rows = [{"seed": r.get("seed"), **_figures(r, f"rl sweep seed {r.get('seed')}"),
             "configs": r.get("configs", r.get("config"))} for r in runs]
    return {"runs": rows, "total": {"cost_usd": total["cost_usd"], "wall_s": total.get("wall_s")},
            "wall_s_measured": result.get("wall_s_measured")}


# --- the CLI's arguments ----------------------------------------------------------------------

def step_cap(env: str, max_steps: int | None) -> int:
    """The step cap every run gets (and so the learning-rate schedule): the benchmarks' rule."""
    from optimizers.seraph.pilot import workload_for

    return workload_for(env, max_steps).max_steps


def static_args(env: str, target: float, seed: int, max_steps: int) -> list[str]:
    from optimizers.seraph.baseline import STATIC_DEFAULT_CONFIG as S

    return ["rl", "train", "--env", env, "--target-reward", str(target), "--actors", str(S.actors),
            "--memory-mb", str(S.memory_mb), "--batch", str(S.batch), "--steps-per-env", str(S.steps_per_env),
            "--max-steps", str(max_steps), "--seed", str(seed), "--checkpoint-every", "0", "--no-progress"]


def tune_args(env: str, target: float, objective: str, seed: int, max_steps: int) -> list[str]:
    return ["rl", "tune", "--env", env, "--target-reward", str(target), "--objective", objective,
            "--seed", str(seed), "--max-steps", str(max_steps)]


def sweep_args(env: str, target: float, objective: str, seeds: Sequence[int], concurrency: int | None,
               max_steps: int | None) -> list[str]:
    args = ["rl", "sweep", "--env", env, "--target-reward", str(target), "--seeds", seeds_arg(seeds),
            "--objective", objective]
    if concurrency is not None:
        args += ["--concurrency", str(concurrency)]
    return args + ([] if max_steps is None else ["--max-steps", str(max_steps)])


def slug(env: str) -> str:
    return env.replace(":", "-").replace(".", "_").replace("/", "_")


# --- running --------------------------------------------------------------------------------

def _static_runs(cli: Cli, env: str, target: float, seed: int, max_steps: int, repeat: bool,
                 res: dict[str, Any]) -> None:
    """The static default on ``seed`` (and again, with ``repeat``), each in a home of its own."""
    for kind in ("static", "static_repeat") if repeat else ("static",):
        progress(f"{env} seed {seed}: {kind.replace('_', ' ')} (rl train at the static default)")
        home = cli.work / f"home-{slug(env)}-{kind}"
        out = cli.run(static_args(env, target, seed, max_steps), home, f"{slug(env)}-{kind}-seed{seed}", seraph=False)
        res[kind].append(train_record(out, seed))


def run_series(cli: Cli, env: str, target: float, seeds: Sequence[int], objectives: Sequence[str], max_steps: int,
               static_repeat: bool, save: Any) -> dict[str, Any]:
    """Seed after seed: ``rl tune`` for each objective (one fresh home per objective, kept across the
    seeds), then the static default on the same seed; ``save`` is called after every run."""
    res: dict[str, Any] = {"env": env, "target_reward": target, "max_steps": max_steps,
                           "series": {o: [] for o in objectives}, "static": [], "static_repeat": []}
    for k, seed in enumerate(seeds, 1):
        for objective in objectives:
            progress(f"{env} run {k} (seed {seed}): rl tune --objective {objective}")
            home = cli.work / f"home-{slug(env)}-{objective}"
            out = cli.run(tune_args(env, target, objective, seed, max_steps), home, f"{slug(env)}-tune-{objective}-seed{seed}")
            res["series"][objective].append(tune_record(out, seed, k))
            save(res)
        _static_runs(cli, env, target, seed, max_steps, static_repeat, res)
        save(res)
    return res


def run_sweep(cli: Cli, env: str, target: float, seeds: Sequence[int], objective: str, concurrency: int | None,
              max_steps: int | None, static_repeat: bool, save: Any) -> dict[str, Any]:
    """One ``rl sweep`` over ``seeds`` in a fresh home, then the static default on each seed."""
    cap = step_cap(env, max_steps)
    res: dict[str, Any] = {"env": env, "target_reward": target, "max_steps": cap, "objective": objective,
                           "seeds": list(seeds), "static": [], "static_repeat": []}
    progress(f"{env}: rl sweep --objective {objective} --seeds {seeds_arg(seeds)}")
    home = cli.work / f"home-{slug(env)}-sweep-{objective}"
    out = cli.run(sweep_args(env, target, objective, seeds, concurrency, max_steps), home, f"{slug(env)}-sweep-{objective}")
    res["sweep"] = sweep_record(out)
    save(res)
    for seed in seeds:
        _static_runs(cli, env, target, seed, cap, static_repeat, res)
        save(res)
    return res


# --- summaries (from the saved runs alone, so --rescore gives the same) ------------------------

def paired(rows: Sequence[dict[str, Any]], static: Sequence[dict[str, Any]]) -> list[tuple[dict[str, Any], dict[str, Any]]]:
    """``rows`` in run order, each with the static run of its seed (rows without one are left out)."""
    by_seed = {r["seed"]: r for r in static}
    ordered = sorted(rows, key=lambda r: r.get("k", 0))
    return [(r, by_seed[r["seed"]]) for r in ordered if r["seed"] in by_seed]


def _interval(statistic: Any, pairs: Sequence[tuple[dict, dict]], key: str) -> dict[str, Any] | None:
    iv = bootstrap_interval(statistic, [a[key] for a, _ in pairs], [b[key] for _, b in pairs])
    return iv.as_dict() if iv else None


def per_run(pairs: Sequence[tuple[dict, dict]]) -> list[dict[str, Any]]:
    """Per run k: its cost and time against the static run of its seed, and the cumulative bill
    (its cost over runs 1..k over the static default's on the same seeds)."""
    rows, mine, base = [], 0.0, 0.0
    for r, s in pairs:
        mine, base = mine + r["cost_usd"], base + s["cost_usd"]
        rows.append({
            "k": r.get("k"), "seed": r["seed"], "arm": r.get("arm"), "config": shape_text(r.get("config")),
            "reached": r["reached"], "static_reached": s["reached"],
            "cost_usd": r["cost_usd"], "static_cost_usd": s["cost_usd"], "cost_ratio": r["cost_usd"] / s["cost_usd"],
            "cumulative_cost_ratio": mine / base,
            "lambda_time_s": r["lambda_time_s"], "static_lambda_time_s": s["lambda_time_s"],
            "time_ratio": r["lambda_time_s"] / s["lambda_time_s"],
            "env_steps": r["env_steps"], "static_env_steps": s["env_steps"],
        })
    return rows


def window(pairs: Sequence[tuple[dict, dict]], span: tuple[int, int], key: str, statistic: Any) -> dict[str, Any]:
    """``statistic`` (a ratio over the same seeds) of runs ``span[0]..span[1]`` (1-based run order);
    ``complete`` when the series has every run of the span."""
    first, last = span
    inside = [p for i, p in enumerate(pairs, 1) if first <= i <= last]
    if not inside:
        return {"window": list(span), "runs": 0, "complete": False, "estimate": None, "interval": None}
    estimate = float(statistic([a[key] for a, _ in inside], [b[key] for _, b in inside], axis=-1))
    return {"window": list(span), "runs": len(inside), "complete": len(pairs) >= last, "estimate": estimate,
            "interval": _interval(statistic, inside, key)}


def _bar(value: float | None, bar: float, complete: bool) -> dict[str, Any]:
    return {"bar": bar, "value": value, "met": None if value is None or not complete else value <= bar}


def summarise_series(env: str, objective: str, rows: Sequence[dict], static: Sequence[dict]) -> dict[str, Any]:
    pairs = paired(rows, static)
    runs = per_run(pairs)
    worst = max(runs, key=lambda r: r["cumulative_cost_ratio"]) if runs else None
    late_cost = window(pairs, LATE_COST_WINDOW, "cost_usd", sum_ratio)
    late_time = window(pairs, LATE_TIME_WINDOW, "lambda_time_s", median_ratio)
    everything = (1, max(len(pairs), 1))
    out = {
        "objective": objective, "runs": len(pairs), "reached": sum(bool(r["reached"]) for r, _ in pairs),
        "per_run": runs,
        "worst_cumulative_cost_ratio": None if worst is None else {"k": worst["k"], "value": worst["cumulative_cost_ratio"]},
        "cost_sum_ratio": window(pairs, everything, "cost_usd", sum_ratio),
        "late_cost_sum_ratio": late_cost,
        "late_median_time_ratio": late_time,
    }
    if objective == "cost":
        out["bars"] = {
            "cumulative_cost_ratio_at_every_k": _bar(worst and worst["cumulative_cost_ratio"], CUMULATIVE_BAR,
                                                     len(pairs) >= LATE_COST_WINDOW[1]),
            "late_cost_sum_ratio": _bar(late_cost["estimate"], LATE_COST_BAR.get(env, LATE_COST_BAR_DEFAULT),
                                        late_cost["complete"]),
        }
    elif objective == "speed":
        out["bars"] = {"late_median_time_ratio": _bar(late_time["estimate"], SPEED_TIME_BAR, late_time["complete"])}
    return out


def summarise_control(static: Sequence[dict], repeat: Sequence[dict]) -> dict[str, Any] | None:
    """The static default against itself on the same seeds: the modelled clock's noise, as ratios."""
    pairs = paired(repeat, static)
    if not pairs:
        return None
    return {"runs": len(pairs), "cost_sum_ratio": window(pairs, (1, len(pairs)), "cost_usd", sum_ratio),
            "median_time_ratio": window(pairs, (1, len(pairs)), "lambda_time_s", median_ratio),
            "env_steps_equal": all(a["env_steps"] == b["env_steps"] for a, b in pairs)}


def summarise_sweep(res: dict[str, Any]) -> dict[str, Any]:
    """The sweep's total against the static default's runs on its seeds, and whether every seed reached."""
    sweep, static = res["sweep"], res["static"]
    wanted = set(res.get("seeds") or [r["seed"] for r in sweep["runs"]])
    static_sum = sum(s["cost_usd"] for s in static if s["seed"] in wanted)
    pairs = paired(sweep["runs"], static)
    reached = {r["seed"] for r in sweep["runs"] if r["reached"]}
    total_ratio = sweep["total"]["cost_usd"] / static_sum if static_sum else None
    every = reached >= wanted
    return {
        "seeds": sorted(wanted), "reached": sorted(reached), "every_seed_reached": every,
        "total_cost_usd": sweep["total"]["cost_usd"], "static_sum_cost_usd": static_sum,
        "total_cost_ratio": total_ratio,
        # the runs alone (no pilots or probes shared across seeds), paired by seed, with an interval
        "runs_cost_sum_ratio": window(pairs, (1, max(len(pairs), 1)), "cost_usd", sum_ratio),
        "runs_time_sum_ratio": window(pairs, (1, max(len(pairs), 1)), "lambda_time_s", sum_ratio),
        "wall_s_measured": {"sweep": sweep.get("wall_s_measured"),
                            "static_sum": sum(s.get("wall_s_measured") or 0.0 for s in static if s["seed"] in wanted)},
        "bars": {"total_cost_ratio": _bar(total_ratio, SWEEP_COST_BAR, len(static) >= len(wanted)),
                 "every_seed_reached": every},
    }


def summarise(res: dict[str, Any]) -> dict[str, Any]:
    """A saved env result's summary, series or sweep."""
    control = summarise_control(res.get("static") or [], res.get("static_repeat") or [])
    if "sweep" in res:
        return {"sweep": summarise_sweep(res), "control": control}
    return {"series": {o: summarise_series(res["env"], o, rows, res.get("static") or [])
                       for o, rows in res.get("series", {}).items()}, "control": control}


# --- printing -------------------------------------------------------------------------------

def _ratio_text(figure: dict[str, Any] | None) -> str:
    if not figure or figure.get("estimate") is None:
        return "-"
    iv = figure.get("interval")
    span = f"runs {figure['window'][0]}-{figure['window'][1]}" + ("" if figure.get("complete", True) else ", incomplete")
    ci = f" [{iv['low']:.3f}, {iv['high']:.3f}]" if iv else ""
    return f"{figure['estimate']:.3f}{ci} (n={figure['runs']}, {span})"


def _bars_text(bars: dict[str, Any]) -> list[str]:
    lines = []
    for name, b in bars.items():
        if isinstance(b, dict):
            met = "not judged (the series does not cover the window)" if b["met"] is None else ("met" if b["met"] else "NOT met")
            value = "-" if b["value"] is None else f"{b['value']:.3f}"
            lines.append(f"  bar {name} <= {b['bar']}: {value}: {met}")
        else:
            lines.append(f"  bar {name}: {'met' if b else 'NOT met'}")
    return lines


def print_series(env: str, summary: dict[str, Any]) -> None:
    labels = "time and cost MODELLED (local Lambda emulator clock, price table); env steps counted"
    for objective, s in summary["series"].items():
        rows = [[r["k"], r["seed"], "-" if r["arm"] is None else str(r["arm"]), r["config"] or "-",
                 r["reached"], f"{r['cost_usd']:.6f}", f"{r['static_cost_usd']:.6f}", r["cost_ratio"], r["cumulative_cost_ratio"],
                 r["lambda_time_s"], r["static_lambda_time_s"], r["time_ratio"]] for r in s["per_run"]]
        print_table(["k", "seed", "arm", "config", "reached", "cost USD", "static USD", "cost x", "cumulative x",
                     "time s", "static s", "time x"], rows, digits=3,
                    title=f"\n{env}: rl tune --objective {objective}, runs one after another in one home, "
                    f"against the static default on the same seeds ({labels})")
        worst = s["worst_cumulative_cost_ratio"]
        if worst:
            print(f"  cumulative bill ratio, worst k: {worst['value']:.3f} (k={worst['k']})")
        print(f"  bill over all runs (sum ratio): {_ratio_text(s['cost_sum_ratio'])}")
        print(f"  sum over runs {LATE_COST_WINDOW[0]}-{LATE_COST_WINDOW[1]}: {_ratio_text(s['late_cost_sum_ratio'])}")
        print(f"  median time over runs {LATE_TIME_WINDOW[0]}-{LATE_TIME_WINDOW[1]}: {_ratio_text(s['late_median_time_ratio'])}")
        for line in _bars_text(s.get("bars", {})):
            print(line)


def print_control(control: dict[str, Any] | None) -> None:
    if control:
        print(f"  control (the static default again on the same seeds; the modelled clock's noise): cost sum ratio "
              f"{_ratio_text(control['cost_sum_ratio'])}, median time ratio {_ratio_text(control['median_time_ratio'])}, "
              f"env steps equal: {control['env_steps_equal']}")


def print_sweep(env: str, summary: dict[str, Any]) -> None:
    s = summary["sweep"]
    print(f"\n{env}: rl sweep over seeds {s['seeds']} against one static-default rl train per seed "
          "(cost and time MODELLED; wall MEASURED)")
    ratio = "-" if s["total_cost_ratio"] is None else f"{s['total_cost_ratio']:.3f}"
    print(f"  sweep total ${s['total_cost_usd']:.6f} (pilots and probes included) / static sum "
          f"${s['static_sum_cost_usd']:.6f} = {ratio}")
    print(f"  the seeds' runs alone, cost sum ratio: {_ratio_text(s['runs_cost_sum_ratio'])}; "
          f"time sum ratio: {_ratio_text(s['runs_time_sum_ratio'])}")
    print(f"  reached: {s['reached']} (every seed: {s['every_seed_reached']}); wall measured: sweep "
          f"{s['wall_s_measured']['sweep'] or 0:.0f} s, static runs {s['wall_s_measured']['static_sum']:.0f} s in all")
    for line in _bars_text(s["bars"]):
        print(line)


def print_result(res: dict[str, Any], summary: dict[str, Any]) -> None:
    if "sweep" in summary:
        print_sweep(res["env"], summary)
    else:
        print_series(res["env"], summary)
    print_control(summary.get("control"))


# --- the command ----------------------------------------------------------------------------

def rescore(path: Path) -> int:
    """Print a saved result as this code summarises it (no training)."""
    try:
        data = json.loads(path.read_text())
        envs = data["envs"]
        for res in envs:
            print_result(res, summarise(res))
    except (OSError, ValueError, KeyError, TypeError) as exc:
        raise SystemExit(f"--rescore {path}: not a readable seraph_history result ({type(exc).__name__}: {exc})") from None
    return 0


def _parser() -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--mode", choices=("series", "sweep"), default="series",
                    help="series: rl tune seed after seed in one home; sweep: one rl sweep over the seeds")
    ap.add_argument("--envs", default="Acrobot-v1", help="comma-separated, each with a target in benchmarks.seraph.TARGETS")
    ap.add_argument("--seeds", default="0-9", help="e.g. 0-9 or 0,1,2 (a series runs them in this order)")
    ap.add_argument("--objectives", default=None, help="series: cost,speed (default); sweep: cost (default)")
    ap.add_argument("--max-steps", type=int, default=None, help="env-step cap (default: three times the env preset's)")
    ap.add_argument("--concurrency", type=int, default=None, help="sweep only: passed to rl sweep --concurrency")
    ap.add_argument("--static-repeat", action="store_true",
                    help="train the static default twice per seed: the control for the modelled clock's noise")
    ap.add_argument("--ignore-references", action="store_true",
                    help="tune as for an env without committed reference runs (its own history is the evidence)")
    ap.add_argument("--timeout-s", type=float, default=None, help="give up on a CLI run after this many seconds")
    ap.add_argument("--work-dir", type=Path, default=None,
                    help="keep the homes, logs and JSON of every run here (a new or empty folder; default: a "
                    "temporary folder, removed at the end unless a run fails)")
    ap.add_argument("--json-out", type=Path, default=None)
    ap.add_argument("--rescore", type=Path, default=None, help="re-summarise a saved result (no training) and exit")
    return ap


def _checked(ap: argparse.ArgumentParser, args: argparse.Namespace) -> tuple[list[str], list[int], list[str]]:
    from benchmarks.seraph import TARGETS
    from optimizers.seraph.objectives import OBJECTIVES

    envs = [e for e in args.envs.split(",") if e]
    unknown = [e for e in envs if e not in TARGETS]
    if not envs or unknown:
        ap.error(f"unknown env(s) {unknown or envs}; allowed: {', '.join(TARGETS)}")
    try:
        seeds = parse_seeds(args.seeds)
    except ValueError as exc:
        ap.error(str(exc))
    objectives = [o for o in (args.objectives or ("cost,speed" if args.mode == "series" else "cost")).split(",") if o]
    bad = [o for o in objectives if o not in OBJECTIVES.names()]
    if not objectives or bad:
        ap.error(f"--objectives: unknown {bad or objectives}; allowed: {', '.join(OBJECTIVES.names())}")
    if args.concurrency is not None and (args.mode != "sweep" or args.concurrency < 1):
        ap.error("--concurrency K needs --mode sweep and K >= 1")
    if args.max_steps is not None and args.max_steps < 1:
        ap.error(f"--max-steps must be >= 1, got {args.max_steps}")
    if args.work_dir is not None and args.work_dir.exists() and any(args.work_dir.iterdir()):
        ap.error(f"--work-dir {args.work_dir} is not empty: each series needs a fresh TRAINWISE_HOME")
    return envs, seeds, objectives


def _run_env(cli: Cli, args: argparse.Namespace, env: str, seeds: list[int], objectives: list[str],
             save: Any) -> list[dict[str, Any]]:
    from benchmarks.seraph import TARGETS

    target = TARGETS[env]
    if args.mode == "series":
        return [run_series(cli, env, target, seeds, objectives, step_cap(env, args.max_steps), args.static_repeat, save)]
    return [run_sweep(cli, env, target, seeds, o, args.concurrency, args.max_steps, args.static_repeat, save)
            for o in objectives]


def main(argv: list[str] | None = None) -> int:
    ap = _parser()
    args = ap.parse_args(argv)
    if args.rescore is not None:
        return rescore(args.rescore)
    envs, seeds, objectives = _checked(ap, args)
    from optimizers.seraph.baseline import STATIC_DEFAULT_CONFIG as S

    work = args.work_dir or Path(tempfile.mkdtemp(prefix="seraph-history-"))
    work.mkdir(parents=True, exist_ok=True)
    cli = Cli(work.resolve(), ignore_references=args.ignore_references, timeout_s=args.timeout_s)
    payload: dict[str, Any] = {
        "benchmark": "seraph_history", "mode": args.mode, "complete": False, "seeds": seeds, "objectives": objectives,
        "ignore_references": args.ignore_references, "static_repeat": args.static_repeat,
        "static_config": {"actors": S.actors, "memory_mb": S.memory_mb, "batch": S.batch, "steps_per_env": S.steps_per_env},
        "labels": {"cost_usd": "modelled (price table)", "lambda_time_s": "modelled (local Lambda emulator clock)",
                   "env_steps": "counted", "wall_s_measured": "measured (the whole CLI subprocess)"},
        "load_before": machine_state(), "envs": [],
    }
    done: list[dict[str, Any]] = []

    def save(current: dict[str, Any]) -> None:  # after every run: a long benchmark loses nothing
        payload["envs"] = [*done, current]
        write_result(args.json_out, payload)

    try:
        for env in envs:
            for res in _run_env(cli, args, env, seeds, objectives, save):
                res["summary"] = summarise(res)
                print_result(res, res["summary"])
                done.append(res)
    except CliFailed as exc:
        print(f"seraph_history: {exc}; the runs finished before it are in {args.json_out or 'no file (no --json-out)'}, "
              f"every run's log and home in {work}", file=sys.stderr)
        return 1
    payload.update(envs=done, complete=True, load_after=machine_state())
    write_result(args.json_out, payload)
    if args.work_dir is None:
        shutil.rmtree(work, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
