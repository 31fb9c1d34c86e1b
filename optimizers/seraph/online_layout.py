"""The rollout layout, decided during the run on its own rollouts: no reference runs needed.

A run that trains at the baseline's layout (``N`` envs of ``T`` steps; RLlib's default is
2 of 2,000) asks, on every early iteration, what a wider, shorter layout at the same
batch (``m·N`` envs of ``T/m`` steps) would have given PPO, measured on the batch just
collected (:mod:`serverless.layout_probe`): the gradient's noise at each layout and the
bias that cutting the segments (GAE bootstrapped every ``T/m`` steps) adds. From those:

* **the predicted ratio of env steps to the target**, layout against current, at the
  same batch: ``(1 + ν_L) / (1 + ν_0) / (1 − β)``, where ``ν = var / (units · |G|²)`` is the
  batch gradient's noise-to-signal ratio (McCandlish et al. 2018: steps to the target
  grow as ``1 + B_noise/B``, and ``B_noise/B`` is that ratio), ``ν_0`` with the current
  envs as the independent units and ``ν_L`` with the chunks, and ``β = |δ|/|G|`` the
  truncation bias relative to the gradient (a gradient off by ``δ`` advances along the
  true one by at least ``1 − β`` of its length);
* **its bound**: the ``BOUND_QUANTILE`` quantile of the ratio over a bootstrap of the
  measured units (pairs of envs, per iteration), with a fixed seed (same run, same
  result);
* **the break-even**: the objective per env step at the layout (its iteration at one
  function per env, from the run's performance model) against the current one's. A
  wider layout runs more functions side by side, so its iterations are shorter: the
  learner VM waits less and the functions' GB-seconds per step stay the same.

It probes only layouts whose break-even exceeds ``1 + LAYOUT_CHANGE_GAIN`` (no other could
pay), and after a window of ``min_units`` probed iterations switches to the layout with the
best predicted objective among those whose bound, times ``1 + e`` (the model's own error) and
``1 + LAYOUT_CHANGE_GAIN`` (what a change of trajectory costs), beats the break-even. Each
layout keeps at least ``step_floor`` steps per env (``max(25, 2 / (1 − γλ))``: shorter
segments cut GAE's horizon). A window that stays ends the exploring; a switch that holds, or
is reverted, opens one more window (``max_windows``).

**The guard.** For ``guard_window`` iterations after a switch it compares the approx KL
and clip fraction with the band of the iterations before the switch (their largest
value, times ``GUARD_FACTOR``, plus a small floor); at the end of the window, the mean
return with the return at the switch less the largest drop seen before it, and the measured
objective per warm iteration (the ledger's cost, the clock's time, the probe's own time left
out) before over after the switch, which must beat the switch's own bar with the measured
figures: the bound times ``1 + LAYOUT_CHANGE_GAIN``. Then the progress check: the mean
return's least-squares rate of climb per env step since the switch against the rate since the
run's start (or the last guard), which may fall to ``1 / (bound · (1 + LAYOUT_CHANGE_GAIN))`` of
itself, the switch's promise, and still pay. It breaches when the rate since the switch sits
below that floor by more than :data:`PROGRESS_Z` standard errors (from the fits' pooled
residuals); below it by less, it watches on, one iteration at a time, up to
``progress_window`` iterations, each only while the risk budget's slack covers one more
guarded iteration's worst case. A return at the switch that the floor's rate would lift to the
target within ``guard_window`` iterations may flatten (the task is nearly solved), and that is
no breach. A breach reverts to the previous layout; that layout is not probed again. A switch
that passes holds; both verdicts are recorded (``revert``, ``hold``) with the rates.

**The risk budget** (a conservative bandit's, Wu et al. 2016: explore only while the run's
objective stays within ``1 + α`` of the baseline's; ``α`` is :data:`RISK_ALPHA`, 10%). Its ledger
(:class:`RiskBudget`) takes every iteration in: what it spent (its measured objective, the
probe's own time included) against what the baseline's layout would have spent for the same
progress (its credit). An iteration at the baseline's layout is credited its own measured
objective, less the probe; one at a switched layout the baseline's objective per iteration
(the median before the switch) over ``ρ · (1 + LAYOUT_CHANGE_GAIN)``, where ``ρ`` is its
env-steps ratio: the worst bootstrap draw while the switch is guarded, the bound once it holds.
The slack, ``(1 + α) · credit − spent``, is thus ``α`` times the baseline's objective, plus what
switches that held banked, less what reverted switches and the probes overspent. A switch's
worst case is its guard window (at most ``guard_window`` iterations before a revert) at the
layout's predicted objective per iteration (the measured one over the break-even, times
``1 + e``) less its credit at the worst draw, and no less than nothing. A switch is taken only
when its worst case fits in the slack, or is nothing (such a switch risks less than staying);
otherwise the decision is ``wait`` (the window keeps
probing and re-checks at each probed iteration, up to ``max_wait`` more) and, at the end of the
window, ``stay``. No window starts, and no probe runs, while the slack is negative.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field, replace
from typing import Any, Callable

import numpy as np
from scipy.stats import linregress

from optimizers.seraph.models import RunShape
from optimizers.seraph.stats import paired_bootstrap

#: the bootstrap quantile of the predicted env-steps ratio a switch is judged on
BOUND_QUANTILE = 0.9
BOOTSTRAP_DRAWS = 400
#: the predicted gain a layout change must promise beyond its bound: a change of layout sends
#: training down another trajectory, as a change of batch does, and a batch change was measured
#: to cost a median 16% in env steps (``controller.SeraphController.batch_change_gain``)
LAYOUT_CHANGE_GAIN = 0.16
#: the guard's band: a statistic breaches at more than this times its pre-switch maximum
GUARD_FACTOR = 2.0
MIN_STEPS_PER_ENV = 25
#: the progress check's "clearly below": the rate of climb since the switch breaches when it sits
#: below its floor by more than this many standard errors of the difference
PROGRESS_Z = 1.0
#: the fewest iterations with a return before the switch the progress check fits a rate on
PROGRESS_MIN_POINTS = 4
#: the conservative risk budget's α: the objective may exceed the baseline's by this fraction
#: (the issue's bar: no seed above 1.10x the static default)
RISK_ALPHA = 0.10


def step_floor(gamma: float, lam: float) -> int:
    """The fewest steps per env a layout may have: ``max(25, 2 / (1 − γλ))``."""
    gl = gamma * lam
    horizon = 2.0 / (1.0 - gl) if gl < 1 else math.inf
    return int(max(MIN_STEPS_PER_ENV, math.ceil(horizon))) if math.isfinite(horizon) else 10**9


#: the most chunks an env's segment is cut into: a probe costs one gradient per chunk
MOST_CHUNKS = 16


def chunk_counts(steps_per_env: int, floor: int, most: int = MOST_CHUNKS) -> tuple[int, ...]:
    """The powers of two ``m`` (2 to ``most``) with ``steps_per_env / m`` at least ``floor``."""
    out, m = [], 2
    while m <= most and steps_per_env / m >= floor:
        out.append(m)
        m *= 2
    return tuple(out)


_UNIT_KEYS = ("var_env", "var_chunk", "signal", "bias")


def predicted_ratio(units: list[dict[str, float]], chunks: int, envs: int) -> float:
    """The predicted env steps to the target at ``chunks``× the envs, over the current
    layout's (see the module's docstring), from pooled pair statistics; inf without signal."""
    sums = [np.array([sum(u[k] for u in units)]) for k in _UNIT_KEYS]
    return float(_ratio(*sums, chunks=chunks, envs=envs)[0])


def _ratio(var_env: np.ndarray, var_chunk: np.ndarray, signal: np.ndarray, bias: np.ndarray, *,
           chunks: int, envs: int) -> np.ndarray:
    """:func:`predicted_ratio` of pooled sums, elementwise (inf where there is no evidence)."""
    with np.errstate(divide="ignore", invalid="ignore"):
        beta = np.sqrt(np.maximum(bias, 0.0) / signal)
        nu0 = np.maximum(var_env / (envs * signal), 0.0)
        nu_l = np.maximum(var_chunk, 0.0) / (chunks * envs * signal)
        ratio = (1 + nu_l) / (1 + nu0) / (1 - beta)
    return np.where((signal <= 0) | (envs < 2) | (beta >= 1), np.inf, ratio)


def bootstrap_draws(units: list[dict[str, float]], chunks: int, envs: int, seed: int) -> list[float]:
    """:func:`predicted_ratio` over :data:`BOOTSTRAP_DRAWS` resamples of ``units``, sorted
    (:func:`optimizers.seraph.stats.paired_bootstrap`: each resample draws whole units)."""
    def ratio_of_sums(*columns: np.ndarray, axis: int = -1) -> np.ndarray:
        return _ratio(*(c.sum(axis=axis) for c in columns), chunks=chunks, envs=envs)

    columns = [[u[k] for u in units] for k in _UNIT_KEYS]
    return paired_bootstrap(columns, ratio_of_sums, resamples=BOOTSTRAP_DRAWS, seed=seed).tolist()


def _bound(draws: list[float]) -> float:
    # numpy's "inverted_cdf" quantile is the draw itself (the ceil(q n)-th smallest): inf-safe,
    # where scipy's interval interpolates and an inf draw beside a finite one gives nan
    return float(np.quantile(draws, BOUND_QUANTILE, method="inverted_cdf"))


def bootstrap_bound(units: list[dict[str, float]], chunks: int, envs: int, seed: int) -> float:
    """The :data:`BOUND_QUANTILE` quantile of :func:`predicted_ratio` over resamples of ``units``."""
    return _bound(bootstrap_draws(units, chunks, envs, seed))


def _num(x: float) -> float | None:
    return round(x, 4) if math.isfinite(x) else None


def _finite(x: float) -> float | None:
    return float(x) if math.isfinite(x) else None


@dataclass(frozen=True)
class LayoutOption:
    """One counterfactual layout's evidence and its verdict."""

    chunks: int
    steps_per_env: int
    actors: int
    units: int
    ratio: float
    bound: float
    worst: float  # the worst bootstrap draw of the ratio
    break_even: float
    passes: bool

    def as_dict(self) -> dict[str, Any]:
        return {
            "chunks": self.chunks, "steps_per_env": self.steps_per_env, "actors": self.actors, "units": self.units,
            "predicted_env_steps_ratio": _num(self.ratio), "bound": _num(self.bound), "worst_draw": _num(self.worst),
            "break_even": _num(self.break_even), "passes": self.passes,
        }


@dataclass(frozen=True)
class RiskBudget:
    """The conservative risk budget's ledger, in the objective's units: what the baseline's
    layout would have spent for the run's progress so far (``credit``) and what the run spent."""

    alpha: float = RISK_ALPHA
    credit: float = 0.0
    spent: float = 0.0

    @property
    def slack(self) -> float:
        """``(1 + α) · credit − spent``: α times the baseline's objective, plus what switches
        that held banked, less what reverted switches and the probes overspent."""
        return (1 + self.alpha) * self.credit - self.spent

    def charge(self, credit: float, spent: float) -> RiskBudget:
        return replace(self, credit=self.credit + credit, spent=self.spent + spent)


@dataclass(frozen=True)
class LayoutDecision:
    """One online layout decision, with its evidence (JSON-ready through :meth:`as_dict`)."""

    iteration: int
    env_steps: int
    action: str  # "switch", "wait", "stay", "revert", "hold"
    from_steps_per_env: int
    to_steps_per_env: int
    reason: str
    options: tuple[LayoutOption, ...] = ()
    budget: RiskBudget | None = None  # the risk budget's ledger at the decision
    worst_case: float | None = None  # what the switch's guard window could lose (switch, wait, a budget's stay)
    allowed: bool | None = None  # whether the slack covered the worst case
    progress: Progress | None = None  # the guard's progress check (revert, hold)

    def as_dict(self) -> dict[str, Any]:
        b = self.budget
        risk = None if b is None else {
            "alpha": b.alpha, "credit": _finite(b.credit), "spent": _finite(b.spent), "slack": _finite(b.slack),
            "worst_case": None if self.worst_case is None else _finite(self.worst_case), "allowed": self.allowed,
        }
        return {
            "iteration": self.iteration, "env_steps": self.env_steps, "action": self.action,
            "from_steps_per_env": self.from_steps_per_env, "to_steps_per_env": self.to_steps_per_env,
            "reason": self.reason, "options": [o.as_dict() for o in self.options], "risk": risk,
            "progress": None if self.progress is None else self.progress.as_dict(),
        }


@dataclass
class _Guard:
    """The pre-switch band and the state to return to on a breach."""

    shape: RunShape
    steps_per_env: int
    kl_max: float
    clip_max: float
    return_at_switch: float | None
    worst_drop: float
    left: int
    before: float  # the objective per iteration before the switch (measured, median)
    bound: float  # the bound on the env-steps ratio the switch was made on
    credit: float  # the budget's credit per guarded iteration (at the worst draw)
    held: float  # the budget's credit per iteration once the switch holds (at the bound)
    restore: float | None  # the credit per iteration at the layout before the switch
    loss: float = 0.0  # what one guarded iteration could lose at the worst draw (no less than nothing)
    returns: list[tuple[float, float]] = field(default_factory=list)  # before the switch, its own iteration included
    watched: int = 0  # guarded iterations so far
    after: list[float] = field(default_factory=list)


def _cold(record: Any) -> bool:
    """An iteration with a cold start: not the steady state a layout is judged by."""
    return int((getattr(record, "rollout", None) or {}).get("cold_starts", 0) or 0) > 0


def _band(history: list[Any]) -> tuple[float, float, float]:
    """Largest approx KL, clip fraction and drop in mean return over ``history``."""
    kls = [float(r.ppo_stats.get("approx_kl", 0.0) or 0.0) for r in history]
    clips = [float(r.ppo_stats.get("clipfrac", 0.0) or 0.0) for r in history]
    returns = [r.mean_return for r in history if r.mean_return is not None]
    drops = [a - b for a, b in zip(returns, returns[1:]) if a > b]
    return max(kls, default=0.0), max(clips, default=0.0), max(drops, default=0.0)


def _returns(history: list[Any]) -> list[tuple[float, float]]:
    """(env steps, mean return) of the iterations in ``history`` that have a return."""
    return [(float(r.env_steps), float(r.mean_return)) for r in history if r.mean_return is not None]


def _fit(points: list[tuple[float, float]]) -> tuple[float, float, float] | None:
    """The least-squares slope of return against env steps (``scipy.stats.linregress``), its
    residual sum of squares and the spread of the env steps (``Σ(x − x̄)²``); None below two
    distinct env-step counts. The progress check pools the residuals of two fits into one
    variance (``linregress``'s own standard error is one fit's), so it needs these two."""
    x, y = np.array([p[0] for p in points]), np.array([p[1] for p in points])
    sxx = float(((x - x.mean()) ** 2).sum()) if len(points) >= 2 else 0.0
    if sxx <= 0:
        return None
    line = linregress(x, y)
    res = y - line.intercept - line.slope * x
    return float(line.slope), float(res @ res), sxx


@dataclass(frozen=True)
class Progress:
    """The guard's progress check: the mean return's rate of climb per env step since the
    switch against the rate before it, scaled down by what the switch promised."""

    verdict: str  # "breach", "unsure", "pass", "near target", "no check"
    text: str
    before: float | None = None  # return per env step before the switch (least squares)
    after: float | None = None  # since the switch (the switch's own iteration included)
    floor: float | None = None  # before / (bound x (1 + LAYOUT_CHANGE_GAIN))
    se: float | None = None  # the standard error of after - floor
    points: tuple[int, int] = (0, 0)  # iterations with a return, before and since the switch

    def as_dict(self) -> dict[str, Any]:
        per_k = {k: None if v is None else _finite(1000 * v) for k, v in
                 (("before", self.before), ("after", self.after), ("floor", self.floor), ("se", self.se))}
        return {"verdict": self.verdict, "per_1000_env_steps": per_k, "points_before": self.points[0],
                "points_after": self.points[1]}


@dataclass
class OnlineLayout:
    """Measures counterfactual layouts on the run's rollouts and decides when to switch.

    ``cost_of(shape)`` gives the predicted (cost, time) of one iteration;
    ``objective(cost, time)`` the scalar to minimise; ``margin`` the model's own relative
    error, added to the bound before it is compared with the break-even; ``budget`` the
    risk budget (its ``alpha`` settable: ``RiskBudget(alpha=...)``)."""

    steps_per_env: int
    shape: RunShape
    floor: int
    cost_of: Callable[[RunShape], tuple[float, float]]
    objective: Callable[[float, float], float]
    margin: Callable[[], float] = lambda: 0.0  # read at each decision
    seed: int = 0
    min_units: int = 3
    guard_window: int = 3
    max_windows: int = 2  # decision windows a run may probe (a switch, held or reverted, opens the next)
    learner_usd_per_s: float = 0.0  # the learner VM's price: the probe's time is charged at it
    max_actors: int = 256
    max_wait: int = 6  # probed iterations a window may add while the slack does not cover the switch
    progress_window: int = 6  # guarded iterations the progress check may watch while it is unsure
    target: float | None = None  # the run's target return: a return near it may flatten
    budget: RiskBudget = field(default_factory=RiskBudget)
    decisions: list[LayoutDecision] = field(default_factory=list)
    _units: dict[int, list[dict[str, float]]] = field(default_factory=dict)
    _envs: int = 0
    _probed: int = 0
    _history: list[Any] = field(default_factory=list)
    _guard: _Guard | None = None
    _done: bool = False
    _candidates: tuple[int, ...] | None = None  # the chunk counts probed at this layout
    _windows: int = 0  # decision windows so far
    _credit: float | None = None  # the budget's credit per iteration at this layout; None: its measured objective
    _prev: Any = None  # the last iteration the budget took in
    _reverted: set[int] = field(default_factory=set)  # the steps per env of the layouts reverted

    def probe(self) -> tuple[int, ...]:
        """The chunk counts to measure on the next iteration: those whose layout the model
        predicts to save more than :data:`LAYOUT_CHANGE_GAIN` per iteration on the objective
        (any other could pay only through fewer env steps than the current layout's, and a
        probe costs learner time), a reverted layout left out; none once exploring is over,
        while a switch is guarded or while the risk budget's slack is negative."""
        if self._done or self._guard is not None:
            return ()
        if self._candidates is None:
            self._candidates = tuple(
                m for m in chunk_counts(self.steps_per_env, self.floor)
                if self.steps_per_env // m not in self._reverted and self._break_even(m) > 1 + LAYOUT_CHANGE_GAIN
            )
            if not self._candidates:
                self._done = True
                last = self._prev  # the decision follows the last iteration taken in (none before the run's first)
                self.decisions.append(LayoutDecision(
                    int(last.iteration) if last is not None else 0, int(last.env_steps) if last is not None else 0,
                    "stay", self.steps_per_env, self.steps_per_env,
                    f"no wider layout{' not reverted before' if self._reverted else ''} is predicted to save more "
                    f"than {LAYOUT_CHANGE_GAIN:.0%} per iteration on the objective: nothing to probe",
                    budget=self.budget,
                ))
        return self._candidates if self.budget.slack >= 0 else ()

    def _break_even(self, m: int) -> float:
        """The objective per iteration now over that at ``m``× the envs (the run's models)."""
        c0, t0 = self.cost_of(self.shape)
        c1, t1 = self.cost_of(self._wider(m))
        v0, v1 = self.objective(c0, t0), self.objective(c1, t1)
        return v0 / v1 if v1 > 0 else 0.0

    def _wider(self, m: int) -> RunShape:
        """The shape at ``m``× the envs: one function per env, same memory and batch."""
        spe = self.steps_per_env // m
        return RunShape(min(self.max_actors, max(self.shape.batch // spe, 1)), self.shape.memory_mb, self.shape.batch)

    def observe(self, record: Any) -> tuple[RunShape, int] | None:
        """Take one iteration in; a new (shape, steps per env) when the layout changes."""
        self._charge(record)
        self._history.append(record)
        if self._guard is not None:
            return self._check_guard(record)
        probe = getattr(record, "layout_probe", None)
        if not probe or self._done:
            return None
        self._envs = int(probe["envs"])
        for row in probe["layouts"]:
            self._units.setdefault(int(row["chunks"]), []).extend(row["pairs"])
        self._probed += 1
        if self._probed < self.min_units:
            return None
        return self._decide(record)

    def _option(self, m: int, margin: float) -> LayoutOption:
        units = self._units.get(m, [])
        spe, actors = self.steps_per_env // m, self._wider(m).actors
        break_even = self._break_even(m)
        ratio = predicted_ratio(units, m, self._envs)
        draws = bootstrap_draws(units, m, self._envs, self.seed + m) if units else [math.inf]
        bound = _bound(draws)
        passes = bound * (1 + margin) * (1 + LAYOUT_CHANGE_GAIN) < break_even
        return LayoutOption(m, spe, actors, len(units), ratio, bound, draws[-1], break_even, passes)

    def _decide(self, record: Any) -> tuple[RunShape, int] | None:
        margin = float(self.margin())
        options = tuple(self._option(m, margin) for m in sorted(self._units))
        passing = [o for o in options if o.passes]
        it, steps = int(record.iteration), int(record.env_steps)
        if not passing:
            self._end_window(stay=True)
            self.decisions.append(LayoutDecision(
                it, steps, "stay", self.steps_per_env, self.steps_per_env,
                f"no layout's bound (q{BOUND_QUANTILE:.0%}) on the env-steps ratio, with the model's error "
                f"({margin:.0%}) and the cost of a change of trajectory ({LAYOUT_CHANGE_GAIN:.0%}) added, beats its "
                "break-even", options, budget=self.budget,
            ))
            return None
        best = min(passing, key=lambda o: o.ratio / o.break_even)
        window = [self._measured(r) for r in self._history[1:][-self.min_units:] if not _cold(r)]
        before = float(np.median(window)) if window else math.inf  # all cold: nothing measured to hold it to
        base = before if self._credit is None else self._credit  # the baseline's objective for one iteration here
        loss = self._loss(best, before, base, margin)
        worst = self.guard_window * loss
        slack = self.budget.slack
        # a switch that cannot lose (worst case nothing) risks less than staying: the slack may
        # be below zero from the probes' own cost, and it still goes
        allowed = worst <= max(slack, 0.0)
        why = (f"{best.actors} envs of {best.steps_per_env} steps: predicted env-steps ratio {best.ratio:.3f}, bound "
               f"{best.bound:.3f} x (1 + {margin:.1%}) x (1 + {LAYOUT_CHANGE_GAIN:.0%}) < break-even "
               f"{best.break_even:.3f}; worst case {worst:.4g} {'<=' if allowed else '>'} slack {slack:.4g}")
        risk = {"budget": self.budget, "worst_case": worst, "allowed": allowed}
        if not allowed:
            waiting = self._probed < self.min_units + self.max_wait
            if not waiting:
                self._end_window(stay=True)
            self.decisions.append(LayoutDecision(
                it, steps, "wait" if waiting else "stay", self.steps_per_env,
                best.steps_per_env if waiting else self.steps_per_env,
                why + (": the risk budget waits" if waiting else f": the slack did not cover it within {self.max_wait} "
                       "more probed iterations"), options, **risk,
            ))
            return None
        self._end_window(stay=False)
        kl, clip, drop = _band(self._history)
        self._guard = _Guard(
            self.shape, self.steps_per_env, kl, clip, record.mean_return, drop, self.guard_window, before, best.bound,
            credit=base / (best.worst * (1 + LAYOUT_CHANGE_GAIN)), held=base / (best.bound * (1 + LAYOUT_CHANGE_GAIN)),
            restore=self._credit, loss=loss, returns=_returns(self._history),
        )
        self.decisions.append(LayoutDecision(it, steps, "switch", self.steps_per_env, best.steps_per_env, why, options,
                                             **risk))
        new = RunShape(best.actors, self.shape.memory_mb, self.shape.batch)
        self.shape, self.steps_per_env = new, best.steps_per_env
        return new, best.steps_per_env

    def _end_window(self, *, stay: bool) -> None:
        """A window's decision is made: a stay ends exploring; after a switch, the next window
        (if any) probes afresh."""
        self._probed, self._units, self._candidates = 0, {}, None
        self._windows += 1
        self._done = self._done or stay

    def _loss(self, best: LayoutOption, before: float, base: float, margin: float) -> float:
        """What one guarded iteration could lose: the layout's predicted objective per iteration
        (the measured ``before`` over the break-even, with the model's error), less the baseline's
        objective (``base`` per iteration here) for its progress at the worst bootstrap draw of the
        env-steps ratio and the cost of a change of trajectory; one that still saves loses nothing.
        The switch's worst case is ``guard_window`` of them (the most before a revert); the
        progress check watches on past the window only while the slack covers one more."""
        if not math.isfinite(before):
            return math.inf
        loss = before * (1 + margin) / best.break_even - base / (best.worst * (1 + LAYOUT_CHANGE_GAIN))
        return max(loss, 0.0)

    def _spent(self, record: Any, previous: Any) -> tuple[float, float]:
        """The objective of one iteration as measured, from its cost (the ledger's growth since
        ``previous``) and time: less the layout probe's own CPU time (priced as the learner VM's),
        and the probe's own share."""
        probe_s = float((getattr(record, "layout_probe", None) or {}).get("cpu_s", 0.0))
        cost, time_s = float(record.cost_usd) - float(previous.cost_usd), float(record.iteration_lambda_s)
        net = self.objective(cost - probe_s * self.learner_usd_per_s, time_s - probe_s)
        return net, self.objective(cost, time_s) - net

    def _measured(self, record: Any) -> float:
        """The objective of one iteration as measured, the probe's own time left out."""
        i = self._history.index(record)  # > 0: the first record of a window is only a reference
        return self._spent(record, self._history[i - 1])[0]

    def _charge(self, record: Any) -> None:
        """The risk budget takes one iteration in: what it spent, the probe included, against
        the baseline's objective for its progress (see the module's docstring)."""
        previous, self._prev = self._prev, record
        if previous is None:
            return  # the first iteration is only a reference
        net, probe = self._spent(record, previous)
        if self._guard is not None:
            credit = self._guard.credit
        else:
            credit = net if self._credit is None else self._credit
        self.budget = self.budget.charge(credit, net + probe)

    def _check_guard(self, record: Any) -> tuple[RunShape, int] | None:
        g = self._guard
        assert g is not None
        if not _cold(record):
            g.after.append(self._measured(record))
        kl = float(record.ppo_stats.get("approx_kl", 0.0) or 0.0)
        clip = float(record.ppo_stats.get("clipfrac", 0.0) or 0.0)
        breach = []
        if kl > GUARD_FACTOR * g.kl_max + 1e-3:
            breach.append(f"approx KL {kl:.4f} > {GUARD_FACTOR:g} x {g.kl_max:.4f}")
        if clip > GUARD_FACTOR * g.clip_max + 0.02:
            breach.append(f"clip fraction {clip:.3f} > {GUARD_FACTOR:g} x {g.clip_max:.3f}")
        g.left -= 1
        g.watched += 1
        if g.left == 0:
            breach += self._final_checks(g, record)
        progress = None
        if g.left <= 0:  # the window is over: the progress check, then hold, revert or watch on
            progress = self._progress(g)
            if progress.verdict == "breach":
                breach.append(progress.text)
            elif (not breach and progress.verdict == "unsure" and g.watched < self.progress_window
                  and g.loss <= max(self.budget.slack, 0.0)):
                return None  # not clearly below: one more iteration, which the slack covers
        if not breach and g.left > 0:
            return None
        it, steps = int(record.iteration), int(record.env_steps)
        # a switch that holds, or is reverted, opens the next window (if any)
        self._guard, self._history, self._done = None, [], self._windows >= self.max_windows
        if breach:
            self.decisions.append(LayoutDecision(
                it, steps, "revert", self.steps_per_env, g.steps_per_env,
                "guard breached: " + "; ".join(breach) + f"; the slack is now {self.budget.slack:.4g}",
                budget=self.budget, progress=progress,
            ))
            self._reverted.add(self.steps_per_env)
            self.shape, self.steps_per_env, self._credit = g.shape, g.steps_per_env, g.restore
            return g.shape, g.steps_per_env
        assert progress is not None
        self.decisions.append(LayoutDecision(
            it, steps, "hold", self.steps_per_env, self.steps_per_env,
            f"guard held after {g.watched} iterations: {progress.text}", budget=self.budget, progress=progress,
        ))
        self._credit = g.held
        return None

    def _progress(self, g: _Guard) -> Progress:
        """The progress check: the least-squares rate of climb of the mean return per env step
        since the switch (its own iteration and the guarded ones) against the rate before it
        (the iterations since the run's start or the last guard), which may fall to
        ``1 / (bound x (1 + LAYOUT_CHANGE_GAIN))`` of itself (what the switch promised) and still
        pay. The rates' standard errors come from their residuals, pooled; "clearly below" is
        more than :data:`PROGRESS_Z` of them. A return at the switch that the floor's rate would
        lift to the target within ``guard_window`` iterations may flatten: the task is nearly
        solved (and a revert could save only those few iterations), so that is not a breach."""
        before = g.returns
        after = before[-1:] + _returns(self._history[-g.watched:])  # the switch's own iteration first
        points = (len(before), len(after))
        fb, fa = _fit(before), _fit(after)
        if len(before) < PROGRESS_MIN_POINTS or len(after) < 3 or fb is None or fa is None:
            return Progress("no check", f"progress not checked: {points[0]} iterations with a return before "
                            f"the switch (at least {PROGRESS_MIN_POINTS}) and {points[1]} since (at least 3)",
                            points=points)
        (b, rss_b, sxx_b), (a, rss_a, sxx_a) = fb, fa
        k = 1000.0  # the text quotes rates per 1,000 env steps
        if b <= 0:
            return Progress("no check", f"progress not checked: the return did not climb before the switch "
                            f"({k * b:.3g} per 1,000 env steps)", b, a, points=points)
        promise = g.bound * (1 + LAYOUT_CHANGE_GAIN)
        floor = b / promise
        dof = len(before) + len(after) - 4
        var = (rss_b + rss_a) / dof if dof > 0 else 0.0
        se = math.sqrt(var / sxx_a + var / sxx_b / promise**2)
        figures = (f"the return climbs {k * a:.3g} per 1,000 env steps since the switch ({len(after)} iterations) "
                   f"against {k * b:.3g} before ({len(before)}); the floor is {k * floor:.3g} (before / "
                   f"(bound {g.bound:.3f} x (1 + {LAYOUT_CHANGE_GAIN:.0%}))), the standard error {k * se:.3g}")
        at_switch = before[-1][1]
        gap = None if self.target is None else self.target - at_switch
        if a < floor and gap is not None and gap <= floor * self.guard_window * self.shape.batch:
            return Progress("near target", f"{figures}: the return at the switch ({at_switch:.1f}) is within "
                            f"{self.guard_window} iterations at the floor of the target ({self.target:g}): a "
                            "return that flattens there is the task nearly solved", b, a, floor, se, points)
        if a < floor - PROGRESS_Z * se:
            return Progress("breach", f"progress: {figures}: clearly below the floor", b, a, floor, se, points)
        if a < floor:
            return Progress("unsure", f"{figures}: below the floor by less than {PROGRESS_Z:g} standard error",
                            b, a, floor, se, points)
        return Progress("pass", f"{figures}: at or above the floor", b, a, floor, se, points)

    def _final_checks(self, g: _Guard, record: Any) -> list[str]:
        """At the end of the guard window: the return, and the measured break-even against the
        env-steps ratio the switch was predicted to need (the cold first iteration left out)."""
        out = []
        if g.return_at_switch is not None and record.mean_return is not None:
            if record.mean_return < g.return_at_switch - g.worst_drop:
                out.append(f"mean return {record.mean_return:.1f} < {g.return_at_switch:.1f} at the switch "
                           f"less the largest drop before it ({g.worst_drop:.1f})")
        need = g.bound * (1 + LAYOUT_CHANGE_GAIN)
        after = float(np.median(g.after)) if g.after else math.inf
        if after > 0 and g.before / after < need:
            out.append(f"measured break-even {g.before / after:.3f} (objective per warm iteration before / after, "
                       f"the probe's own time left out) < the bound {g.bound:.3f} x (1 + {LAYOUT_CHANGE_GAIN:.0%})")
        return out

    def follow(self, shape: RunShape) -> None:
        """The re-planner moved the actors or memory at this layout."""
        self.shape = replace(shape)


@dataclass
class LayoutController:
    """The trainer's controller for a run at the baseline's layout: the online layout
    decision (:class:`OnlineLayout`) over the re-planning controller (``inner``, may be
    None). The trainer asks it which layouts to probe (``layout_probe``)."""

    layout: OnlineLayout
    planner: Any
    make_run_config: Callable[[RunShape], Any]
    inner: Any = None

    def layout_probe(self) -> tuple[int, ...]:
        return self.layout.probe()

    def after_iteration(self, record: Any) -> Any | None:
        planned = self.inner.after_iteration(record) if self.inner is not None else None
        change = self.layout.observe(record)
        if change is not None:
            shape, steps_per_env = change
            self._retarget(shape, steps_per_env)
            return replace(self.make_run_config(shape), steps_per_env=steps_per_env)
        if planned is None:
            return None
        self.layout.follow(self.inner.current)
        return replace(planned, steps_per_env=self.layout.steps_per_env)

    def _retarget(self, shape: RunShape, steps_per_env: int) -> None:
        """The planner searches the new layout (a function runs at least one env) and the
        re-planning controller continues from ``shape``."""
        self.planner.steps_per_env = steps_per_env
        self.planner.space = replace(self.planner.space, min_steps_per_actor=max(32, steps_per_env))
        if self.inner is not None:
            self.inner.current = shape

    @property
    def decisions(self) -> list[Any]:
        return [] if self.inner is None else self.inner.decisions
