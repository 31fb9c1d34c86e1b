"""Learning across the runs of a job: which configuration (arm) the next run trains at.

Inside one fresh run, Seraph cannot tell an env that learns as well from a smaller batch
(Acrobot, Beacon: batch 1,000 costs 0.66x the static default) from one that does not
(Pendulum: 1.15x and more); the hindsight grid showed no early statistic that separates
them (docs/seraph.md). Across runs of the same job the answer is measured: each run is
evidence for the next. This module is the decision; :mod:`optimizers.seraph.history`
keeps the evidence.

**Arms.** The tuner's own run (``seraph``: profile, plan, train, as a first run does) and
two ladders of fixed configurations stepping away from the baseline configuration: for
cost, the batch halved and quartered at the baseline's functions and memory (env slots
scaled with the batch, one env per function); for time, four and eight times the
functions (the second at half the batch). ``balanced`` climbs both.

**A conservative bandit** (after Wu et al., "Conservative Bandits", ICML 2016). The
reference is the mean objective value of the job's ``seraph`` runs (1.0 in its units). A
run explores an arm only when the job's bill so far, plus the arm's worst case, stays
within ``(1 + margin) x k`` reference runs for the k-th run: a user's cumulative bill over
runs 1..k stays within the margin of k runs at the reference. An arm never run is assumed
to cost ``unexplored_ratio``; once run, its measured mean. Along a ladder the objective is
taken to be unimodal (under the gradient-noise-scale model env steps fall and cost per
step rises as the batch shrinks), so a step is explored only after the step before it
improved on the reference by ``improvement``. One run is weak evidence: the tuner's own
runs of one job, at the same configuration and env steps, differ by 10-20% in modelled
cost, the clock's noise on a loaded host beside the seed's. A step that missed the bar by
less than one standard error (the reference runs' spread over the square root of the step's
runs) is inconclusive and runs again, up to ``most_runs_per_step`` runs, its worst case then
its measured mean plus that error; a step that missed it by more, or ran that many times,
did not pay, and its ladder stops. When nothing is worth exploring, the run
exploits: the arm with the lowest measured mean that reached the target every time, if it
beats the reference by ``improvement``; else the tuner's own run.

**The race** (:class:`RaceGuard`). An explored arm is raced against the reference runs'
curves at a matched spend: when the arm has spent ``race_from_share`` of a reference run's
bill, its mean return must be at least the worst reference run's return at the same
spend, else it switches to the baseline's configuration and keeps its weights. This bounds
what a losing exploration costs (Pendulum's halved batch learns as fast per env step but
pays more per step, so it trails at a matched spend).
"""

from __future__ import annotations

import statistics
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Iterable

from optimizers.seraph.history import Phase, RunRecord
from serverless.run_shape import RunShape

if TYPE_CHECKING:
    from serverless.trainer import IterationRecord

#: The tuner's own run: profile (or the cached profile), plan, train with re-planning.
SERAPH = "seraph"
#: A fixed run at the baseline configuration (``rl train`` at it, or a race's fallback).
BASELINE = "baseline"


@dataclass(frozen=True)
class BanditSettings:
    """Every number of the decision, in one place (docs/seraph.md, "Learning across runs")."""

    margin: float = 0.10  # the cumulative bill stays within (1 + margin) x the reference's
    # an arm never run is assumed to cost this x the reference: the first steps of both ladders
    # cost 0.58-1.26x the static default on Acrobot, Beacon and Pendulum in the hindsight grid
    unexplored_ratio: float = 1.3
    improvement: float = 0.05  # a step (or an exploit) must beat the reference by this share
    # the most runs a ladder step gets while its evidence is inconclusive: measured worse than
    # the bar, but within one standard error (the reference runs' spread over sqrt(runs)) of it
    most_runs_per_step: int = 2
    # the race: checked from this share of a reference run's bill, once the reference runs have
    # come this share of the way from their first return to the target (before it, returns are
    # the untrained policy's noise), and given up at the last share
    race_from_share: float = 0.3
    race_progress: float = 0.25
    race_until_share: float = 0.8


@dataclass(frozen=True)
class Arm:
    """A fixed configuration a run trains at from its first iteration: a shape, its layout set."""

    name: str
    shape: RunShape

    def phase(self, from_env_steps: int = 0) -> Phase:
        return Phase(self.shape, from_env_steps)

    def describe(self) -> str:
        s = self.shape
        return f"{self.name}: {s.actors} functions x {s.memory_mb} MB, batch {s.batch}, env slots of {s.steps_per_env} steps"


def _scaled(name: str, base: RunShape, actors_x: int, batch_div: int) -> Arm | None:
    """The baseline with ``actors_x`` times the functions and the batch divided by ``batch_div``;
    the env slots shrink so each function still runs at least one (None when none fits)."""
    actors, batch = base.actors * actors_x, base.batch // batch_div
    steps_per_env = min(base.steps_per_env * base.actors * batch // (base.batch * actors) or 1, batch // actors)
    if batch < actors or steps_per_env < 1:
        return None
    return Arm(name, RunShape(actors, base.memory_mb, batch, steps_per_env))


def baseline_arm(base: RunShape) -> Arm:
    """The baseline (its layout set, :func:`optimizers.seraph.baseline.baseline_of`) as an arm."""
    return Arm(BASELINE, base)


def ladders(base: RunShape, objective: str) -> tuple[tuple[Arm, ...], ...]:
    """The ladders the objective climbs (see the module's docstring), each step a fixed arm."""
    cost = (_scaled("batch/2", base, 1, 2), _scaled("batch/4", base, 1, 4))
    speed = (_scaled("wide x4", base, 4, 1), _scaled("wide x8 batch/2", base, 8, 2))
    chosen = {"cost": (cost,), "speed": (speed,)}.get(objective, (cost, speed))
    return tuple(tuple(a for a in ladder if a is not None) for ladder in chosen)


@dataclass(frozen=True)
class ArmStats:
    """What the history says of one arm, in the reference's units (1.0 = a reference run)."""

    name: str
    runs: int
    mean_ratio: float | None  # None: never run
    reached_all: bool
    error: float = 0.0  # one standard error of the mean: the reference runs' spread over sqrt(runs)

    def pays(self, settings: BanditSettings) -> bool:
        """Beat the reference by ``improvement``, every run reaching the target."""
        return self.reached_all and self.mean_ratio is not None and self.mean_ratio <= 1 - settings.improvement

    def inconclusive(self, settings: BanditSettings) -> bool:
        """Missed the bar by less than one standard error, with runs to spare."""
        return (self.reached_all and self.mean_ratio is not None and not self.pays(settings)
                and self.runs < settings.most_runs_per_step
                and self.mean_ratio - self.error <= 1 - settings.improvement)

    def to_dict(self) -> dict[str, Any]:
        return {"arm": self.name, "runs": self.runs, "mean_ratio": self.mean_ratio, "reached_all": self.reached_all,
                "standard_error": self.error}


@dataclass(frozen=True)
class ArmChoice:
    """The next run's arm and why: ``arm`` None is the tuner's own run."""

    name: str
    arm: Arm | None
    reason: str
    explore: bool = False
    history_runs: int = 0
    spent: float = 0.0  # the job's bill so far, in reference runs
    budget: float = 0.0  # what it may reach with this run, in reference runs
    stats: tuple[ArmStats, ...] = ()
    reference: dict[str, float] = field(default_factory=dict)  # the reference run's mean cost and time

    def to_dict(self) -> dict[str, Any]:
        return {
            "arm": self.name, "config": None if self.arm is None else self.arm.phase().to_dict(),
            "reason": self.reason, "explore": self.explore, "history_runs": self.history_runs,
            "spent_reference_runs": round(self.spent, 4), "budget_reference_runs": round(self.budget, 4),
            "arms": [s.to_dict() for s in self.stats], "reference": self.reference,
        }


class Scale:
    """An objective's value of a run in reference units: the reference runs' mean is 1.0."""

    def __init__(self, objective: str, weight: float, reference_runs: list[RunRecord]) -> None:
        self.objective, self.weight = objective, weight
        self.cost = statistics.fmean(r.cost_usd for r in reference_runs)
        self.time = statistics.fmean(r.lambda_time_s for r in reference_runs)

    def value(self, cost_usd: float, time_s: float) -> float:
        c, t = cost_usd / self.cost, time_s / self.time
        return {"cost": c, "speed": t}.get(self.objective, self.weight * c + (1 - self.weight) * t)

    def of(self, run: RunRecord) -> float:
        return self.value(run.cost_usd, run.lambda_time_s)


def _stats(name: str, runs: list[RunRecord], scale: Scale, spread: float) -> ArmStats:
    mine = [r for r in runs if r.arm == name]
    mean = statistics.fmean(scale.of(r) for r in mine) if mine else None
    return ArmStats(name, len(mine), mean, all(r.reached for r in mine), spread / len(mine) ** 0.5 if mine else 0.0)


def choose_arm(
    runs: list[RunRecord], objective: str, weight: float, base: RunShape,
    settings: BanditSettings = BanditSettings(), pending: Iterable[str] = (),
) -> ArmChoice:
    """The arm of the job's next run from its history ``runs`` (see the module's docstring).
    ``pending``: arms of runs started but not yet recorded (a sweep's concurrent seeds)."""
    reference_runs = [r for r in runs if r.arm == SERAPH]
    if not reference_runs:
        return ArmChoice(SERAPH, None, "no earlier run of this job: the tuner profiles, plans and trains as a first run")
    scale = Scale(objective, weight, reference_runs)
    known = {a.name: a for ladder in ladders(base, objective) for a in ladder}
    counted = [r for r in runs if r.arm == SERAPH or r.arm in known or r.arm == BASELINE]
    values = [scale.of(r) for r in reference_runs]
    spread = statistics.stdev(values) if len(values) >= 2 else 0.0
    stats = {name: _stats(name, counted, scale, spread) for name in (SERAPH, *known)}
    pending = list(pending)
    spent = sum(scale.of(r) for r in counted) + sum(_worst_case(stats[p], settings) for p in pending if p in stats)
    k = len(counted) + len(pending) + 1
    budget = (1 + settings.margin) * k
    common = dict(history_runs=len(runs), spent=spent, budget=budget, stats=tuple(stats.values()),
                  reference={"cost_usd": scale.cost, "lambda_time_s": scale.time})
    for arm in _next_steps(base, objective, stats, pending, settings):
        s, worst = stats[arm.name], _worst_case(stats[arm.name], settings)
        if spent + worst <= budget:
            what = ("its assumed worst case" if s.mean_ratio is None else
                    f"its measured {s.mean_ratio:.2f} plus one standard error, {s.error:.2f} (again: it missed the "
                    f"bar, {1 - settings.improvement:.2f}, by less than that error)")
            return ArmChoice(arm.name, arm, f"explore {arm.describe()}: the bill so far ({spent:.2f} reference runs) "
                             f"plus {what} ({worst:.2f}) is within {1 + settings.margin:.2f} x {k} runs",
                             explore=True, **common)
    best = min((s for s in stats.values() if s.name != SERAPH and s.mean_ratio is not None and s.reached_all),
               key=lambda s: s.mean_ratio or 0.0, default=None)
    if best is not None and best.pays(settings):
        return ArmChoice(best.name, known[best.name], f"exploit {known[best.name].describe()}: {best.runs} run(s) "
                         f"at {best.mean_ratio:.2f}x the tuner's own runs", **common)
    why = "no arm measured better than the tuner's own runs" if best is not None else "nothing explored yet"
    return ArmChoice(SERAPH, None, f"the tuner's own run: {why} (bill so far {spent:.2f} of {budget:.2f} "
                     "reference runs)", **common)


def _worst_case(s: ArmStats, settings: BanditSettings) -> float:
    """What a run of the arm is counted at before it ends: the assumed worst case when never
    run, else its measured mean plus one standard error."""
    return settings.unexplored_ratio if s.mean_ratio is None else s.mean_ratio + s.error


def _next_steps(base: RunShape, objective: str, stats: dict[str, ArmStats], pending: list[str],
                settings: BanditSettings) -> list[Arm]:
    """Each ladder's next step to run: the first unexplored one if every step before it
    paid, or an inconclusive step again."""
    steps = []
    for ladder in ladders(base, objective):
        for arm in ladder:
            s = stats[arm.name]
            if s.mean_ratio is None or s.inconclusive(settings):
                if arm.name not in pending:
                    steps.append(arm)
                break
            if not s.pays(settings):
                break  # this step did not pay: the ladder stops here
    return steps


class RaceGuard:
    """The trainer's controller for an explored arm: one check at a matched spend against the
    reference runs' curves (see the module's docstring); ``decisions`` says what it did."""

    def __init__(self, reference_runs: list[RunRecord], objective: str, target: float, fallback: "RunShape",
                 settings: BanditSettings = BanditSettings()) -> None:
        self.by_time = objective == "speed"
        self.curves = [r.curve for r in reference_runs if r.curve]
        spend = statistics.fmean(self._spend(r.cost_usd, r.lambda_time_s) for r in reference_runs) if reference_runs else 0.0
        self.window = (settings.race_from_share * spend, settings.race_until_share * spend) if self.curves else (1.0, 0.0)
        self.start = statistics.median(c[0][1] for c in self.curves) if self.curves else 0.0
        self.target, self.progress = target, settings.race_progress
        self.fallback = fallback
        self.time_s = 0.0
        self.done = False
        self.decisions: list[str] = []

    def _spend(self, cost_usd: float, time_s: float) -> float:
        return time_s if self.by_time else cost_usd

    def _reference_return(self, curve: tuple[tuple[int, float, float, float], ...], spend: float) -> float | None:
        """The reference run's mean return when it had spent ``spend`` (its last point at or before)."""
        at = [ret for _, ret, cost, time_s in curve if self._spend(cost, time_s) <= spend]
        return at[-1] if at else None

    def after_iteration(self, record: "IterationRecord") -> "RunShape | None":
        self.time_s += record.iteration_lambda_s
        spend = self._spend(record.cost_usd, self.time_s)
        if self.done or spend < self.window[0] or record.mean_return is None:
            return None
        if spend > self.window[1]:
            self.done = True
            self.decisions.append(f"race: the reference runs had not come {self.progress:.0%} of the way to the "
                                  f"target by {spend:.6g} spent: no check, stay")
            return None
        refs = [r for r in (self._reference_return(c, spend) for c in self.curves) if r is not None]
        moved = (statistics.median(refs) - self.start) / (self.target - self.start) if refs and self.target != self.start else 0.0
        if moved < self.progress:
            return None  # the reference runs are still at their untrained returns: wait
        self.done = True
        shown = ", ".join(f"{r:.1f}" for r in refs)
        if record.mean_return >= min(refs):
            self.decisions.append(f"race at {spend:.6g} spent: return {record.mean_return:.1f} keeps up with the "
                                  f"reference runs ({shown}): stay")
            return None
        self.decisions.append(f"race at {spend:.6g} spent: return {record.mean_return:.1f} trails every reference "
                              f"run ({shown}): switch to the baseline configuration")
        return self.fallback
