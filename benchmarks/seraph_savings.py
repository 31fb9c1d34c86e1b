"""Where a Seraph series saved, by source: env steps, functions, the learner's machine, tuning.

    python -m benchmarks.seraph_savings --work-dir W [--objective cost] [--json-out F]

Reads the per-run JSON a ``benchmarks.seraph_history --work-dir W`` series kept (each seed's
``rl tune`` result beside the static default's ``rl train`` on the same seed) and splits the
difference of every pair by source (:mod:`optimizers.seraph.savings`). Each part is summed
over the seeds and given as a share of the static default's summed bill: the parts add up to
the series' bill ratio minus 1. Costs are the runs' own labels (modelled on the emulator).
"""

from __future__ import annotations

import argparse
import json
import re
from pathlib import Path
from typing import Any

from benchmarks._common import print_table, write_result
from optimizers.seraph.savings import Bill, SavingSplit, split_saving

PARTS = ("env_steps_usd", "functions_usd", "learner_usd", "tuning_usd")


def pairs(folder: Path, objective: str) -> dict[str, list[tuple[Bill, Bill]]]:
    """Per env, the (tune, static) bills of every seed that has both."""
    out: dict[str, list[tuple[Bill, Bill]]] = {}
    for tune in sorted(folder.glob(f"*-tune-{objective}-seed*.json")):
        match = re.fullmatch(rf"(.+)-tune-{objective}-seed(\d+)\.json", tune.name)
        static = folder / f"{match[1]}-static-seed{match[2]}.json" if match else None
        if static is not None and static.is_file():
            bills = (Bill.of_result(json.loads(tune.read_text())), Bill.of_result(json.loads(static.read_text())))
            out.setdefault(match[1], []).append(bills)  # type: ignore[index]
    return out


def summary(env_pairs: list[tuple[Bill, Bill]]) -> dict[str, Any]:
    total = SavingSplit(0.0, 0.0, 0.0, 0.0)
    for run, base in env_pairs:
        total = total + split_saving(run, base)
    static = sum(base.total_usd for _, base in env_pairs)
    return {"seeds": len(env_pairs), "static_usd": static, "bill_ratio": 1 + total.total_usd / static,
            **{f"{part}_share": total.to_dict()[part] / static for part in PARTS}}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--work-dir", type=Path, required=True, help="a seraph_history --work-dir")
    ap.add_argument("--objective", default="cost")
    ap.add_argument("--json-out", type=Path, default=None)
    args = ap.parse_args(argv)
    folder = args.work_dir / "json"
    if not folder.is_dir():
        ap.error(f"{folder} is not a folder: give the --work-dir of a benchmarks.seraph_history run")
    result = {env: summary(p) for env, p in pairs(folder, args.objective).items()}
    if not result:
        ap.error(f"no pairs of {args.objective} tune and static runs in {folder}")
    rows = [[env, s["seeds"], f"{s['bill_ratio']:.3f}", *(f"{s[f'{p}_share']:+.3f}" for p in PARTS)]
            for env, s in result.items()]
    print_table(["env", "seeds", "bill x", "env steps", "functions", "learner", "tuning"], rows,
                title="saving by source, as a share of the static default's bill (modelled)")
    if args.json_out is not None:
        write_result(args.json_out, {"benchmark": "seraph_savings", "objective": args.objective, "envs": result})
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
