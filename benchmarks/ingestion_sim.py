"""Simulated part of the ingestion benchmark: InTune vs the grid oracle, the Plumber LP and a
model of AUTOTUNE on simulated 8/32/64/96-vCPU nodes, over read-, parse- and transform-bound
pipelines. Every figure here is **simulated** (labelled so in the JSON and the table).

    python -m benchmarks.ingestion_sim --json-out runs/ingestion_sim.json
    python -m benchmarks.ingestion_sim --nodes 8 --kinds parse          # a quick one
    python -m benchmarks.ingestion_sim --sim-error-data DATA_DIR         # + simulator error vs real

Protocol, per (node, pipeline kind):
- the *true* pipeline is a random DLRM-like model of that kind (seeded);
- InTune and the Plumber LP see a *calibrated* copy whose costs and sizes are off by a
  log-normal error of ``--calibration-error`` (default 0.10, about the error we measure on the
  real pipeline), as they would after profiling; InTune then takes up to ``--trials`` steps on the
  true pipeline with 3% measurement noise; its result is the true throughput of the
  configuration it recommends (the best by the mean of its measurements: it measures its
  closest candidates once more before it stops);
- the AUTOTUNE model hill-climbs with the true costs (tf.data measures them at run time);
- the oracle is the best configuration of the whole knob grid on the true pipeline.

``--sim-error-data DIR`` also calibrates the simulator on the real DLRM pipeline over ``DIR``
(this machine as the node), measures every configuration of its grid and reports the
simulator's error per configuration (run it under ``flock /tmp/trainwise-bench.lock``).
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from typing import Any

import numpy as np

SIM_LABEL = "simulated"


def _rng_for(seed: int, vcpus: int, kind: str) -> np.random.Generator:
    return np.random.default_rng([seed, vcpus, ["read", "parse", "transform"].index(kind)])


def make_case(seed: int, vcpus: int, kind: str, calibration_error: float) -> tuple[Any, Any, Any, Any]:
    """One benchmark case: (node, true pipeline, its calibrated copy, knob space), seeded."""
    from ingestion.simulator import SIM_NODES, dlrm_like_space, random_pipeline
    from optimizers.intune.env import perturbed

    node = SIM_NODES[vcpus]
    rng = _rng_for(seed, vcpus, kind)
    truth = random_pipeline(rng, kind)
    return node, truth, perturbed(truth, rng, calibration_error), dlrm_like_space(node)


def run_case(vcpus: int, kind: str, *, seed: int, trials: int, calibration_error: float, agent: Any) -> dict[str, Any]:
    from ingestion.simulator import simulate, simulated_oracle
    from optimizers.asktell import run
    from optimizers.baselines.autotune_model import LABEL as AUTOTUNE_LABEL
    from optimizers.baselines.autotune_model import hill_climb
    from optimizers.baselines.plumber import plumber_plan
    from optimizers.intune.settings import InTuneSettings
    from optimizers.intune.optimizer import InTuneOptimizer

    node, truth, belief, space = make_case(seed, vcpus, kind, calibration_error)
    t0 = time.monotonic()
    oracle_cfg, oracle_m, grid_size = simulated_oracle(truth, space, node)
    oracle_s = time.monotonic() - t0

    noise_rng = np.random.default_rng([seed, vcpus, 99])
    evaluate = lambda c: simulate(truth, c, node, noise=0.03, rng=noise_rng)  # noqa: E731
    t0 = time.monotonic()
    opt = InTuneOptimizer(space, node, belief, agent, InTuneSettings(max_steps=trials, finetune_steps=0))
    res = run(opt, evaluate, max_trials=trials + 1)
    intune_s = time.monotonic() - t0
    best_cfg = opt.best[0] if opt.best is not None else res.best_config  # its pick: best mean measurement
    intune_true = simulate(truth, best_cfg, node)
    ooms = sum(1 for t in res.trials if t.measurement.failed)

    plan = plumber_plan(space, node, belief)
    plumber_true = simulate(truth, plan["config"], node)
    auto_cfg, auto_info = hill_climb(truth, space, node)
    auto_true = simulate(truth, auto_cfg, node)
    start_true = simulate(truth, opt.start, node)

    def entry(cfg: dict, m: Any, **more: Any) -> dict[str, Any]:
        return {"config": cfg, "rows_per_s": m.rows_per_s, "oom": m.failed, "vs_oracle": m.rows_per_s / oracle_m.rows_per_s,
                "memory_fraction": m.extra.get("memory_fraction"), "label": SIM_LABEL, **more}

    return {
        "node": {"name": node.name, "vcpus": node.vcpus, "ram_gib": node.ram_gib, "hourly_usd_modelled": node.hourly_usd},
        "pipeline": kind + "-bound",
        "grid_size": grid_size,
        "oracle": entry(oracle_cfg, oracle_m, search_s=oracle_s),
        "intune": entry(best_cfg, intune_true, trials=len(res.trials), oom_trials=ooms, stopped_by=opt.finished,
                        start_vs_oracle=start_true.rows_per_s / oracle_m.rows_per_s, start_source=opt.state.start_source,
                        tuning_s=intune_s),
        "plumber_lp": entry(plan["config"], plumber_true, lp_rows_per_s_on_calibrated_model=plan["lp_rows_per_s"]),
        "autotune_model": entry(auto_cfg, auto_true, model=AUTOTUNE_LABEL, **auto_info),
    }


def sim_error(data_dir: str, *, window_s: float = 1.0) -> dict[str, Any]:
    """Calibrate on the real DLRM pipeline and compare the simulator with every grid point."""
    from ingestion.calibrate import calibrate
    from ingestion.dlrm import dlrm_spec
    from ingestion.measure import MeasureWorker
    from ingestion.node import this_machine
    from ingestion.simulator import simulate

    node = this_machine()
    spec = dlrm_spec(data_dir)
    t0 = time.monotonic()
    cal = calibrate(spec, node, use_cache=False)
    cal_s = time.monotonic() - t0
    points = []
    with MeasureWorker(spec, memory_limit_mb=node.ram_budget_mb) as w:
        for config in spec.space.grid():
            m = w.measure(config, warmup_s=1.0, window_s=window_s, repeats=2)
            s = simulate(cal.model, config, node)
            err = abs(s.rows_per_s - m.rows_per_s) / m.rows_per_s if m.rows_per_s > 0 else None
            points.append({"config": config, "measured_rows_per_s": m.rows_per_s, "simulated_rows_per_s": s.rows_per_s,
                           "abs_rel_error": err, "spread": m.extra.get("spread")})
            print(f"  sim {s.rows_per_s:10,.0f}  measured {m.rows_per_s:10,.0f}  {config}", file=sys.stderr)
    errs = [p["abs_rel_error"] for p in points if p["abs_rel_error"] is not None]
    best_measured = max(points, key=lambda p: p["measured_rows_per_s"])
    best_sim = max(points, key=lambda p: p["simulated_rows_per_s"])
    return {
        "pipeline": spec.name,
        "node": node.__dict__,
        "calibration_s": cal_s,
        "calibration": cal.to_json(),
        "grid_points": len(points),
        "mean_abs_rel_error": float(np.mean(errs)) if errs else None,
        "median_abs_rel_error": float(np.median(errs)) if errs else None,
        "max_abs_rel_error": float(np.max(errs)) if errs else None,
        "simulator_best_vs_measured_best": best_sim["measured_rows_per_s"] / best_measured["measured_rows_per_s"],
        "points": points,
        "label": "simulated vs measured",
    }


def run_simulated(args: argparse.Namespace) -> dict[str, Any]:
    """The simulated benchmark (``args``: nodes, kinds, seed, trials, calibration_error, agent)."""
    import torch

    from optimizers.intune.agent import MaskedDQN
    from benchmarks._common import repo_path
    from optimizers.intune.pretrain import PRETRAINED

    torch.set_num_threads(1)
    nodes = list(getattr(args, "nodes", None) or [8, 32, 64, 96])
    kinds = list(getattr(args, "kinds", None) or ["read", "parse", "transform"])
    seed = int(getattr(args, "seed", 0))
    trials = int(getattr(args, "trials", 40))
    cal_err = float(getattr(args, "calibration_error", 0.10))
    agent_path = getattr(args, "agent", None) or PRETRAINED
    agent = MaskedDQN.load(agent_path)
    data = getattr(args, "sim_error_data", None)
    if getattr(args, "skip_sim", False):
        return {"benchmark": "ingestion-simulated", "simulator_error": sim_error(data)} if data else {}
    cases = []
    for v in nodes:
        for kind in kinds:
            case = run_case(v, kind, seed=seed, trials=trials, calibration_error=cal_err, agent=agent)
            cases.append(case)
            print(_row(case), file=sys.stderr, flush=True)
    intune_ratios = [c["intune"]["vs_oracle"] for c in cases]
    summary = {
        "label": SIM_LABEL,
        "intune_min_vs_oracle": min(intune_ratios),
        "intune_mean_vs_oracle": float(np.mean(intune_ratios)),
        "intune_oom_trials": sum(c["intune"]["oom_trials"] for c in cases),
        "intune_final_oom": sum(bool(c["intune"]["oom"]) for c in cases),
        "plumber_lp_min_vs_oracle": min(c["plumber_lp"]["vs_oracle"] for c in cases),
        "autotune_model_min_vs_oracle": min(c["autotune_model"]["vs_oracle"] for c in cases),
        "bar_intune_at_least_0_95_oracle_each": all(r >= 0.95 for r in intune_ratios),
        "bar_never_oom": all(c["intune"]["oom_trials"] == 0 for c in cases),
    }
    out: dict[str, Any] = {
        "benchmark": "ingestion-simulated",
        "agent": repo_path(agent_path),
        "agent_info": agent.info,
        "protocol": {"seed": seed, "trials": trials, "calibration_error": cal_err, "measurement_noise": 0.03},
        "cases": cases,
        "summary": summary,
    }
    if data:
        out["simulator_error"] = sim_error(data)
    return out


def _row(c: dict[str, Any]) -> str:
    return (f"{c['node']['vcpus']:>3} vCPU {c['pipeline']:<16} oracle {c['oracle']['rows_per_s']:>12,.0f}  "
            f"InTune {c['intune']['vs_oracle']:.3f}x ({c['intune']['trials']} trials, OOM {c['intune']['oom_trials']})  "
            f"Plumber-LP {c['plumber_lp']['vs_oracle']:.3f}x  AUTOTUNE-model {c['autotune_model']['vs_oracle']:.3f}x  [simulated]")


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description="Simulated InTune benchmark (all figures simulated)")
    p.add_argument("--nodes", type=int, nargs="+", default=[8, 32, 64, 96], choices=[8, 32, 64, 96])
    p.add_argument("--kinds", nargs="+", default=["read", "parse", "transform"], choices=["read", "parse", "transform"])
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--trials", type=int, default=40, help="live (true-simulator) steps InTune may take")
    p.add_argument("--calibration-error", type=float, default=0.10)
    p.add_argument("--agent", default=None, help="saved agent (path without suffix); default: the committed one")
    p.add_argument("--sim-error-data", default=None, help="real data dir: also measure the simulator's error")
    p.add_argument("--skip-sim", action="store_true", help="only the simulator-error part (needs --sim-error-data)")
    p.add_argument("--json-out", default=None)
    args = p.parse_args(argv)
    result = run_simulated(args)
    s = result.get("summary")
    if s:
        print(f"\nInTune vs grid oracle (simulated): min {s['intune_min_vs_oracle']:.3f}x, mean {s['intune_mean_vs_oracle']:.3f}x; "
              f"OOM trials {s['intune_oom_trials']}; Plumber-LP min {s['plumber_lp_min_vs_oracle']:.3f}x; "
              f"AUTOTUNE-model min {s['autotune_model_min_vs_oracle']:.3f}x")
    if "simulator_error" in result:
        e = result["simulator_error"]
        print(f"simulator error vs real pipeline over {e['grid_points']} grid points: mean {e['mean_abs_rel_error']:.3f}, "
              f"max {e['max_abs_rel_error']:.3f}")
    if args.json_out:
        from core.results import write_json

        write_json(args.json_out, result)
        print(f"wrote {args.json_out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
