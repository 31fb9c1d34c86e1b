"""Benchmark: the demo twice from a cold start; how much the profile cache saves.

Runs ``trainwise run --config <config>`` twice, one after the other, with a fresh
``TRAINWISE_HOME`` (caches), ``TRAINWISE_RUNS`` and ``PREFECT_HOME`` shared by the two
runs and by nothing else, so the first run starts cold and the second can reuse
the first's profiles (and generated data). Prints both wall times, the ratio, and
what each run's report says about its profiles; ``--json-out`` writes the same.

    .venv/bin/python -m benchmarks.demo_cache [--config configs/demo.yaml] [--json-out FILE]

Run it under the bench lock when others measure: ``flock /tmp/trainwise-bench.lock ...``.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]


def run_once(config: str, env: dict[str, str], log: Path) -> dict[str, Any]:
    result_json = log.with_suffix(".json")
    cmd = [str(ROOT / ".venv/bin/trainwise"), "run", "--config", config, "--json-out", str(result_json)]
    t0 = time.perf_counter()
    with log.open("w") as fh:
        proc = subprocess.run(cmd, cwd=ROOT, env=env, stdout=fh, stderr=subprocess.STDOUT)
    wall = time.perf_counter() - t0
    text = log.read_text()
    out: dict[str, Any] = {
        "wall_s": round(wall, 1),
        "wall_s_label": "measured",
        "exit_code": proc.returncode,
        "log": str(log),
        "says_cached": "cached" in text.lower() and "profile cached" in text.lower(),
    }
    if result_json.is_file():
        res = json.loads(result_json.read_text())
        out["profile_cache"] = res.get("profile_cache")
        out["report"] = res.get("report")
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--config", default="configs/demo.yaml")
    ap.add_argument("--json-out", type=Path, default=None)
    args = ap.parse_args(argv)

    work = Path(tempfile.mkdtemp(prefix="trainwise-demo-cache-"))
    env = dict(os.environ)
    env.update(
        TRAINWISE_HOME=str(work / "home"),
        TRAINWISE_RUNS=str(work / "runs"),
        PREFECT_HOME=str(work / "prefect-home"),
        PREFECT_SERVER_ANALYTICS_ENABLED="false",
    )
    env.pop("PREFECT_API_URL", None)  # the embedded server, as a new user has it
    first = run_once(args.config, env, work / "run1.log")
    second = run_once(args.config, env, work / "run2.log")
    ratio = first["wall_s"] / second["wall_s"] if second["wall_s"] else None

    print(f"{'run':<8}{'wall s (measured)':>18}  profiles")
    for name, r in (("first", first), ("second", second)):
        print(f"{name:<8}{r['wall_s']:>18.1f}  {r.get('profile_cache')}  exit {r['exit_code']}")
    print(f"speed-up of the second run: {ratio:.2f}x" if ratio else "no ratio (a run failed)")
    print(f"logs and results under {work}")

    payload = {
        "benchmark": "demo_cache",
        "config": args.config,
        "first": first,
        "second": second,
        "speedup_first_over_second": None if ratio is None else round(ratio, 2),
        "workdir": str(work),
    }
    if args.json_out:
        from core.results import write_json

        write_json(args.json_out, payload)
    ok = first["exit_code"] == 0 and second["exit_code"] == 0
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
