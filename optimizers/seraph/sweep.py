"""A sweep: one job trained over many seeds, each seed's arm chosen from the job's history.

RL results are reported over seeds, and the user pays for all of them. ``rl sweep`` trains
each seed to the target as its own run of the job (:func:`optimizers.seraph.learning.run_job`):
the first run is the tuner's own, later ones take the arm the history supports, and every
outcome joins the history before the next seed is decided. With ``concurrency`` K, K seeds
train at once (threads, each with its own function backend); a seed's decision counts the
arms its running neighbours are exploring (``pending``), so concurrent seeds race different
arms rather than repeating one. Each seed keeps its own weights: an explored arm that trails
the reference runs at a matched spend switches its configuration, never copies another
seed's policy.

``total.cost_usd`` is everything the sweep paid: every seed's run, its pilot and probes
included (modelled on the local emulator, labelled).
"""

from __future__ import annotations

import threading
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Callable

from core.errors import UserError
from core.json_edge import JsonObject
from optimizers.seraph.arms import BanditSettings
from optimizers.seraph.history import Phase
from optimizers.seraph.job import SeraphJob
from optimizers.seraph.learning import decide, history_of, run_job
from optimizers.seraph.request import SeraphRequest
from optimizers.seraph.seeds import parse_seeds  # noqa: F401  (the sweep's seed list, re-exported)


@dataclass(frozen=True)
class SeedRun:
    """One seed's run of the sweep."""

    seed: int
    arm: str
    reason: str
    reached: bool
    env_steps: int
    cost_usd: float
    lambda_time_s: float
    wall_s: float
    configs: tuple[Phase, ...]

    def to_dict(self) -> JsonObject:
        return {"seed": self.seed, "arm": self.arm, "reason": self.reason, "reached": self.reached,
                "env_steps": self.env_steps, "cost_usd": self.cost_usd, "lambda_time_s": self.lambda_time_s,
                "wall_s": self.wall_s, "configs": [p.__dict__ for p in self.configs]}


@dataclass(frozen=True)
class SweepResult:
    job: str
    label: str
    runs: tuple[SeedRun, ...]
    wall_s: float
    concurrency: int

    def to_dict(self) -> JsonObject:
        return {
            "job": self.job, "label": self.label, "concurrency": self.concurrency,
            "runs": [r.to_dict() for r in sorted(self.runs, key=lambda r: r.seed)],
            "total": {"cost_usd": sum(r.cost_usd for r in self.runs),
                      "lambda_time_s": sum(r.lambda_time_s for r in self.runs),
                      "reached": sum(r.reached for r in self.runs), "seeds": len(self.runs),
                      "wall_s": self.wall_s, "wall_s_label": "measured",
                      "cost_label": f"{self.label}; every seed's run, pilots and probes included"},
        }


def request_for_seed(request: SeraphRequest, seed: int) -> SeraphRequest:
    return SeraphRequest.from_dict({**request.to_dict(), "seed": seed})


class _Sweep:
    """The seeds' runs and the arms in flight, under one lock."""

    def __init__(self, request: SeraphRequest, settings: BanditSettings, on_done: Callable[[SeedRun], None]) -> None:
        self.request, self.settings, self.on_done = request, settings, on_done
        self.lock = threading.Lock()
        self.pending: dict[int, str] = {}
        self.job = ""  # the job's description, from the first seed's history key

    def run_seed(self, seed: int) -> SeedRun:
        job = SeraphJob.of(request_for_seed(self.request, seed))
        history = history_of(job)
        self.job = self.job or history.key.describe()
        with self.lock:
            choice = decide(job, history, self.settings, pending=self.pending.values())
            self.pending[seed] = choice.name
        try:
            outcome = run_job(job, choice, history, source="rl sweep", settings=self.settings)
        finally:
            with self.lock:
                del self.pending[seed]
        if outcome.record is None:
            raise UserError(f"seed {seed}: nothing trained ({outcome.result.get('plan', {}).get('message', 'infeasible plan')})")
        r = outcome.record
        run = SeedRun(seed, r.arm, choice.reason, r.reached, r.env_steps, r.cost_usd, r.lambda_time_s, r.wall_s, r.phases)
        self.on_done(run)
        return run


def sweep(request: SeraphRequest, seeds: tuple[int, ...], *, concurrency: int = 1,
          settings: BanditSettings = BanditSettings(), progress: bool = False,
          on_seed: Callable[[SeedRun], None] | None = None) -> SweepResult:
    """Train ``request``'s job once per seed (see the module's docstring); ``on_seed`` hears of
    each seed as it finishes."""
    if concurrency < 1:
        raise UserError(f"--concurrency must be >= 1, got {concurrency}")
    from tqdm import tqdm

    bar = tqdm(total=len(seeds), desc="sweep", unit="seed", disable=not progress)
    spent = [0.0]

    def done(run: SeedRun) -> None:
        spent[0] += run.cost_usd
        bar.set_postfix_str(f"seed {run.seed}: {run.arm}, reached={run.reached}; ${spent[0]:.5f} so far (modelled)")
        bar.update(1)
        if on_seed is not None:
            on_seed(run)

    state = _Sweep(request, settings, done)
    t0 = time.perf_counter()
    try:
        if concurrency == 1:
            runs = [state.run_seed(s) for s in seeds]
        else:
            with ThreadPoolExecutor(max_workers=concurrency, thread_name_prefix="seed") as pool:
                runs = list(pool.map(state.run_seed, seeds))
    finally:
        bar.close()
    from optimizers.seraph.accounting import figures_label

    return SweepResult(state.job, figures_label(request.backend), tuple(runs), time.perf_counter() - t0, concurrency)
