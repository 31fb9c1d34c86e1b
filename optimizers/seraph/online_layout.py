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
* **its bound**: a high quantile of the ratio over a bootstrap of the measured units (pairs
  of envs, per iteration), with a fixed seed (same run, same result);
* **the break-even**: the objective per env step at the layout (its iteration at one
  function per env, from the run's performance model) against the current one's. A
  wider layout runs more functions side by side, so its iterations are shorter: the
  learner VM waits less and the functions' GB-seconds per step stay the same.

Every number it decides with is a field of :class:`OnlineLayoutSettings`, with where its
value comes from. It probes only layouts whose break-even exceeds ``1 + g`` (``g`` the change
gain: no other could pay), each keeping at least the step floor per env (``max(25, 2 / (1 −
γλ))``: shorter segments cut GAE's horizon) and cut into at most the chunk cap. After a window
of ``min_units`` probed iterations it switches to the layout with the best predicted objective
among those whose bound, times ``1 + e`` (the model's own error) and ``1 + g`` (what a change of
trajectory costs), beats the break-even. A window that stays ends the exploring; a switch that
holds, or is reverted, opens one more window (up to ``max_windows``).

**The guard.** For ``guard_window`` iterations after a switch it measures the objective per
warm iteration (the ledger's cost, the clock's time, the probe's own time left out); at the end
of the window the median before the switch over the median after it (the measured break-even)
must beat the switch's own bar with the measured figures: the bound times ``1 + g``. If it does
not, the run reverts to the previous layout and that layout is not probed again; if it does, the
switch holds. Both verdicts are recorded (``revert``, ``hold``) with the figures.

**The risk budget** (a conservative bandit's, Wu et al. 2016: explore only while the run's
objective stays within ``1 + α`` of the baseline's; ``α`` 10%, the bar "no seed above 1.10x the
static default"). Its ledger (:class:`RiskBudget`) takes every iteration in: what it spent (its
measured objective, the probe's own time included) against what the baseline's layout would
have spent for the same progress (its credit). An iteration at the baseline's layout is
credited its own measured objective, less the probe; one at a switched layout the baseline's
objective per iteration (the median before the switch) over ``ρ · (1 + g)``, where ``ρ`` is its
env-steps ratio: the worst bootstrap draw while the switch is guarded, the bound once it holds.
The slack, ``(1 + α) · credit − spent``, is thus ``α`` times the baseline's objective, plus what
switches that held banked, less what reverted switches and the probes overspent. A switch's
worst case is its guard window (the iterations it runs before a revert can come) at the
layout's predicted objective per iteration (the measured one over the break-even, times
``1 + e``) less its credit at the worst draw, and no less than nothing. A switch is taken only
when its worst case fits in the slack, or is nothing (such a switch risks less than staying);
otherwise the decision is ``wait`` (the window keeps probing and re-checks at each probed
iteration, up to ``max_wait`` more) and, at the end of the window, ``stay``. No window starts,
and no probe runs, while the slack is negative.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field, replace
from typing import Any, Callable

import numpy as np

from serverless.run_shape import RunShape
from optimizers.seraph.stats import paired_bootstrap


@dataclass(frozen=True)
class OnlineLayoutSettings:
    """Every number the online layout decides with. The defaults are the values the recorded runs
    (``benchmarks/results/``) were decided with, each commented with where it comes from: measured,
    the issue's bar, or chosen (docs/seraph.md, "The layout, decided online", says why)."""

    change_gain: float = 0.16  # measured: a batch change costs a median 16% in env steps (batch_change_gain)
    bound_quantile: float = 0.9  # chosen: the bootstrap quantile of the env-steps ratio a switch is judged on
    bootstrap_draws: int = 400  # chosen: resamples behind that quantile (seeded: a run repeats its bound)
    min_steps_per_env: int = 25  # chosen: the step floor's least steps per env, beside GAE's 2 / (1 − γλ)
    most_chunks: int = 16  # chosen: the probe costs a gradient per chunk (125 steps per env at 2,000)
    min_units: int = 3  # chosen: probed iterations per window, the probe's learner time against evidence
    guard_window: int = 3  # chosen: iterations after a switch before its measured break-even is judged
    max_windows: int = 2  # chosen: a window at the baseline's layout, one more after its switch
    risk_alpha: float = 0.10  # the bar: no seed above 1.10x the static default
    max_wait: int = 6  # chosen, a cap: probed iterations a window adds while the slack does not cover the switch
    max_actors: int = 256  # the search's largest actor count (space.DEFAULT_ACTOR_COUNTS)

    def __post_init__(self) -> None:
        least = {"bootstrap_draws": 1, "min_steps_per_env": 1, "most_chunks": 1, "min_units": 1, "guard_window": 1,
                 "max_windows": 1, "max_wait": 0, "max_actors": 1}
        for name, low in least.items():
            if getattr(self, name) < low:
                raise ValueError(f"OnlineLayoutSettings.{name} is {getattr(self, name)}: a count, at least {low}")
        if not 0 < self.bound_quantile < 1:
            raise ValueError(f"OnlineLayoutSettings.bound_quantile is {self.bound_quantile}: between 0 and 1")
        for name in ("change_gain", "risk_alpha"):
            if not getattr(self, name) >= 0:
                raise ValueError(f"OnlineLayoutSettings.{name} is {getattr(self, name)}: a fraction, 0 or more")

    def step_floor(self, gamma: float, lam: float) -> int:
        """The fewest steps per env a layout may have: ``max(min_steps_per_env, 2 / (1 − γλ))``."""
        gl = gamma * lam
        horizon = 2.0 / (1.0 - gl) if gl < 1 else math.inf
        return int(max(self.min_steps_per_env, math.ceil(horizon))) if math.isfinite(horizon) else 10**9

    def chunk_counts(self, steps_per_env: int, floor: int) -> tuple[int, ...]:
        """The powers of two ``m`` (2 to ``most_chunks``) with ``steps_per_env / m`` at least ``floor``."""
        out, m = [], 2
        while m <= self.most_chunks and steps_per_env / m >= floor:
            out.append(m)
            m *= 2
        return tuple(out)

    def bound(self, draws: list[float]) -> float:
        """The ``bound_quantile`` quantile of the bootstrap draws."""
        # numpy's "inverted_cdf" quantile is the draw itself (the ceil(q n)-th smallest): inf-safe,
        # where scipy's interval interpolates and an inf draw beside a finite one gives nan
        return float(np.quantile(draws, self.bound_quantile, method="inverted_cdf"))


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


def bootstrap_draws(units: list[dict[str, float]], chunks: int, envs: int, seed: int,
                    resamples: int = OnlineLayoutSettings.bootstrap_draws) -> list[float]:
    """:func:`predicted_ratio` over ``resamples`` resamples of ``units``, sorted
    (:func:`optimizers.seraph.stats.paired_bootstrap`: each resample draws whole units)."""
    def ratio_of_sums(*columns: np.ndarray, axis: int = -1) -> np.ndarray:
        return _ratio(*(c.sum(axis=axis) for c in columns), chunks=chunks, envs=envs)

    columns = [[u[k] for u in units] for k in _UNIT_KEYS]
    return paired_bootstrap(columns, ratio_of_sums, resamples=resamples, seed=seed).tolist()


def bootstrap_bound(units: list[dict[str, float]], chunks: int, envs: int, seed: int,
                    settings: OnlineLayoutSettings = OnlineLayoutSettings()) -> float:
    """The settings' quantile of :func:`predicted_ratio` over resamples of ``units``."""
    return settings.bound(bootstrap_draws(units, chunks, envs, seed, settings.bootstrap_draws))


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

    alpha: float
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
        }


@dataclass
class _Guard:
    """What a switch is judged against at the end of its guard window, and the state to return to."""

    shape: RunShape
    steps_per_env: int
    left: int  # guarded iterations still to run
    before: float  # the objective per iteration before the switch (measured, median)
    bound: float  # the bound on the env-steps ratio the switch was made on
    credit: float  # the budget's credit per guarded iteration (at the worst draw)
    held: float  # the budget's credit per iteration once the switch holds (at the bound)
    restore: float | None  # the credit per iteration at the layout before the switch
    after: list[float] = field(default_factory=list)  # the objective of each warm guarded iteration

    def measured_break_even(self) -> float:
        """The objective per warm iteration before the switch over after it (medians); 0 when no
        guarded iteration was warm (nothing measured to hold the switch to), inf when after is free."""
        after = float(np.median(self.after)) if self.after else math.inf
        return self.before / after if after > 0 else math.inf


def _cold(record: Any) -> bool:
    """An iteration with a cold start: not the steady state a layout is judged by."""
    return int((getattr(record, "rollout", None) or {}).get("cold_starts", 0) or 0) > 0


@dataclass
class OnlineLayout:
    """Measures counterfactual layouts on the run's rollouts and decides when to switch.

    ``cost_of(shape)`` gives the predicted (cost, time) of one iteration;
    ``objective(cost, time)`` the scalar to minimise; ``margin`` the model's own relative
    error, added to the bound before it is compared with the break-even; ``floor`` the
    fewest steps per env (:meth:`OnlineLayoutSettings.step_floor`); ``settings`` every number
    the decision is made with."""

    steps_per_env: int
    shape: RunShape
    floor: int
    cost_of: Callable[[RunShape], tuple[float, float]]
    objective: Callable[[float, float], float]
    margin: Callable[[], float] = lambda: 0.0  # read at each decision
    seed: int = 0
    learner_usd_per_s: float = 0.0  # the learner VM's price: the probe's time is charged at it
    settings: OnlineLayoutSettings = field(default_factory=OnlineLayoutSettings)
    budget: RiskBudget = field(init=False)  # the risk budget's ledger, at the settings' α
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

    def __post_init__(self) -> None:
        self.budget = RiskBudget(alpha=self.settings.risk_alpha)

    @property
    def _gain(self) -> float:
        """``1 + g``: what a layout change must promise beyond its bound."""
        return 1 + self.settings.change_gain

    def probe(self) -> tuple[int, ...]:
        """The chunk counts to measure on the next iteration: those whose layout the model
        predicts to save more than the change gain per iteration on the objective (any other
        could pay only through fewer env steps than the current layout's, and a probe costs
        learner time), a reverted layout left out; none once exploring is over, while a switch
        is guarded or while the risk budget's slack is negative."""
        if self._done or self._guard is not None:
            return ()
        if self._candidates is None:
            self._candidates = tuple(
                m for m in self.settings.chunk_counts(self.steps_per_env, self.floor)
                if self.steps_per_env // m not in self._reverted and self._break_even(m) > self._gain
            )
            if not self._candidates:
                self._done = True
                last = self._prev  # the decision follows the last iteration taken in (none before the run's first)
                self.decisions.append(LayoutDecision(
                    int(last.iteration) if last is not None else 0, int(last.env_steps) if last is not None else 0,
                    "stay", self.steps_per_env, self.steps_per_env,
                    f"no wider layout{' not reverted before' if self._reverted else ''} is predicted to save more "
                    f"than {self.settings.change_gain:.0%} per iteration on the objective: nothing to probe",
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
        actors = min(self.settings.max_actors, max(self.shape.batch // spe, 1))
        return replace(self.shape, actors=actors)

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
        if self._probed < self.settings.min_units:
            return None
        return self._decide(record)

    def _option(self, m: int, margin: float) -> LayoutOption:
        units = self._units.get(m, [])
        spe, actors = self.steps_per_env // m, self._wider(m).actors
        break_even = self._break_even(m)
        ratio = predicted_ratio(units, m, self._envs)
        draws = (bootstrap_draws(units, m, self._envs, self.seed + m, self.settings.bootstrap_draws) if units
                 else [math.inf])
        bound = self.settings.bound(draws)
        passes = bound * (1 + margin) * self._gain < break_even
        return LayoutOption(m, spe, actors, len(units), ratio, bound, draws[-1], break_even, passes)

    def _decide(self, record: Any) -> tuple[RunShape, int] | None:
        s, margin = self.settings, float(self.margin())
        options = tuple(self._option(m, margin) for m in sorted(self._units))
        passing = [o for o in options if o.passes]
        it, steps = int(record.iteration), int(record.env_steps)
        if not passing:
            self._end_window(stay=True)
            self.decisions.append(LayoutDecision(
                it, steps, "stay", self.steps_per_env, self.steps_per_env,
                f"no layout's bound (q{s.bound_quantile:.0%}) on the env-steps ratio, with the model's error "
                f"({margin:.0%}) and the cost of a change of trajectory ({s.change_gain:.0%}) added, beats its "
                "break-even", options, budget=self.budget,
            ))
            return None
        best = min(passing, key=lambda o: o.ratio / o.break_even)
        window = [self._measured(r) for r in self._history[1:][-s.min_units:] if not _cold(r)]
        before = float(np.median(window)) if window else math.inf  # all cold: nothing measured to hold it to
        base = before if self._credit is None else self._credit  # the baseline's objective for one iteration here
        worst = s.guard_window * self._loss(best, before, base, margin)
        slack = self.budget.slack
        # a switch that cannot lose (worst case nothing) risks less than staying: the slack may
        # be below zero from the probes' own cost, and it still goes
        allowed = worst <= max(slack, 0.0)
        why = (f"{best.actors} envs of {best.steps_per_env} steps: predicted env-steps ratio {best.ratio:.3f}, bound "
               f"{best.bound:.3f} x (1 + {margin:.1%}) x (1 + {s.change_gain:.0%}) < break-even "
               f"{best.break_even:.3f}; worst case {worst:.4g} {'<=' if allowed else '>'} slack {slack:.4g}")
        risk = {"budget": self.budget, "worst_case": worst, "allowed": allowed}
        if not allowed:
            waiting = self._probed < s.min_units + s.max_wait
            if not waiting:
                self._end_window(stay=True)
            self.decisions.append(LayoutDecision(
                it, steps, "wait" if waiting else "stay", self.steps_per_env,
                best.steps_per_env if waiting else self.steps_per_env,
                why + (": the risk budget waits" if waiting else f": the slack did not cover it within {s.max_wait} "
                       "more probed iterations"), options, **risk,
            ))
            return None
        self._end_window(stay=False)
        self._guard = _Guard(
            self.shape, self.steps_per_env, s.guard_window, before, best.bound,
            credit=base / (best.worst * self._gain), held=base / (best.bound * self._gain), restore=self._credit,
        )
        self.decisions.append(LayoutDecision(it, steps, "switch", self.steps_per_env, best.steps_per_env, why, options,
                                             **risk))
        new = replace(self.shape, actors=best.actors)
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
        The switch's worst case is ``guard_window`` of them (the most before a revert)."""
        if not math.isfinite(before):
            return math.inf
        loss = before * (1 + margin) / best.break_even - base / (best.worst * self._gain)
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
        """One guarded iteration; at the end of the window, the measured break-even against the
        switch's bar (the bound times ``1 + g``): below it reverts, at or above it holds."""
        g = self._guard
        assert g is not None
        if not _cold(record):
            g.after.append(self._measured(record))
        g.left -= 1
        if g.left > 0:
            return None
        it, steps = int(record.iteration), int(record.env_steps)
        measured, need = g.measured_break_even(), g.bound * self._gain
        figures = (f"measured break-even {measured:.3f} (objective per warm iteration before / after, the probe's "
                   f"own time left out) {{}} the bound {g.bound:.3f} x (1 + {self.settings.change_gain:.0%})")
        # a switch that holds, or is reverted, opens the next window (if any)
        self._guard, self._history, self._done = None, [], self._windows >= self.settings.max_windows
        if measured < need:
            self.decisions.append(LayoutDecision(
                it, steps, "revert", self.steps_per_env, g.steps_per_env,
                "guard breached: " + figures.format("<") + f"; the slack is now {self.budget.slack:.4g}",
                budget=self.budget,
            ))
            self._reverted.add(self.steps_per_env)
            self.shape, self.steps_per_env, self._credit = g.shape, g.steps_per_env, g.restore
            return g.shape, g.steps_per_env
        self.decisions.append(LayoutDecision(
            it, steps, "hold", self.steps_per_env, self.steps_per_env,
            f"guard held after {self.settings.guard_window} iterations: " + figures.format(">="), budget=self.budget,
        ))
        self._credit = g.held
        return None

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
    inner: Any = None

    def layout_probe(self) -> tuple[int, ...]:
        return self.layout.probe()

    def after_iteration(self, record: Any) -> RunShape | None:
        planned = self.inner.after_iteration(record) if self.inner is not None else None
        change = self.layout.observe(record)
        if change is not None:
            shape, steps_per_env = change
            self._retarget(shape, steps_per_env)
            return replace(shape, steps_per_env=steps_per_env)
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
