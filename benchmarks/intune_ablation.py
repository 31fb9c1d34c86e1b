"""Where InTune's simulated figure comes from: the pre-trained agent vs an untrained network, each
with and without the calibrated model's help (model-gain ranking, online refit, model jumps).
All figures are **simulated**; same protocol and cases as ``benchmarks.ingestion_sim``.

    python -m benchmarks.intune_ablation --json-out runs/intune_ablation.json
"""

from __future__ import annotations

import argparse
import sys
from typing import Any

import numpy as np


def run_ablation(seed: int = 0, trials: int = 40, calibration_error: float = 0.10) -> dict[str, Any]:
    import torch

    from benchmarks.ingestion_sim import make_case
    from ingestion.simulator import simulate, simulated_oracle
    from optimizers.asktell import run
    from optimizers.intune.agent import DQNConfig, MaskedDQN
    from optimizers.intune.pretrain import PRETRAINED
    from optimizers.intune.settings import InTuneSettings
    from optimizers.intune.optimizer import InTuneOptimizer

    torch.set_num_threads(1)
    agents = {"pretrained": MaskedDQN.load(PRETRAINED), "untrained": MaskedDQN(DQNConfig(), seed=seed)}
    variants = {
        f"{name}{suffix}": (agent, kwargs)
        for name, agent in agents.items()
        for suffix, kwargs in (("+model", {}), ("-alone", {"model_weight": 0.0, "refit": False}))
    }
    ratios: dict[str, list[float]] = {v: [] for v in variants}
    cases = []
    for vcpus in (8, 32, 64, 96):
        for kind in ("read", "parse", "transform"):
            node, truth, belief, space = make_case(seed, vcpus, kind, calibration_error)
            _, oracle, _ = simulated_oracle(truth, space, node)
            case: dict[str, Any] = {"vcpus": vcpus, "pipeline": f"{kind}-bound"}
            for name, (agent, kwargs) in variants.items():
                opt = InTuneOptimizer(space, node, belief, agent, InTuneSettings(max_steps=trials, finetune_steps=0, **kwargs))
                noise = np.random.default_rng([seed, vcpus, 99])
                res = run(opt, lambda c: simulate(truth, c, node, noise=0.03, rng=noise), max_trials=trials + 1)
                r = simulate(truth, opt.best[0], node).rows_per_s / oracle.rows_per_s  # its recommendation
                ratios[name].append(r)
                case[name] = {"vs_oracle": r, "trials": len(res.trials)}
            cases.append(case)
            print(f"{vcpus:>3} vCPU {kind + '-bound':<16} "
                  + "  ".join(f"{n} {case[n]['vs_oracle']:.3f}" for n in variants), file=sys.stderr, flush=True)
    summary = {n: {"min_vs_oracle": min(v), "mean_vs_oracle": float(np.mean(v))} for n, v in ratios.items()}
    return {"benchmark": "intune-ablation", "label": "simulated", "seed": seed, "cases": cases, "summary": summary}


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description="InTune ablation on the simulator (all figures simulated)")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--json-out", default=None)
    args = p.parse_args(argv)
    result = run_ablation(args.seed)
    for name, s in result["summary"].items():
        print(f"{name:<20} min {s['min_vs_oracle']:.3f}x  mean {s['mean_vs_oracle']:.3f}x  [simulated]")
    if args.json_out:
        from core.results import write_json

        write_json(args.json_out, result)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
