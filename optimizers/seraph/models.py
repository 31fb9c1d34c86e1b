"""Performance, cost and training-progress models fitted to a profile.

Three small models, each with one job:

* :class:`PerformanceModel`: modelled Lambda time of one training iteration from the
  number of actor functions ``a``, their memory ``m`` and the batch ``B``
  (env steps per iteration, split evenly over the actors)::

      rollout_s(a, m, B) = o + c * log2(a) + k_m * B / a        (k_m = 1 / steps-per-second at m)
      billed_s(a, m, B)  = o_b + k'_m * B / a                   (billed ms per invocation)
      learner_s(B)       = l0 + l1 * B
      other_s(B)         = q0 + q1 * B                          (weights encoding, GAE, batch assembly)
      iteration_s        = rollout_s + learner_s + other_s

  ``o`` is the invocation overhead (payload, weight loading), ``c`` the measured cost of
  more concurrency on the backend at hand, ``k_m`` per profiled memory size. Each is a
  linear least-squares fit; the fit error (in-sample and leave-one-out median absolute
  percentage error) is reported with the model.
* :class:`CostModel`: Lambda GB-seconds + requests + learner VM time, priced with the
  same table the trainer's ledger uses.
* :class:`ProgressModel`: env steps and updates to the target reward as a function of
  the batch, from the gradient noise scale (McCandlish et al. 2018)::

      E(B) = E_min (1 + B / B_noise)       S(B) = S_min (1 + B_noise / B),  E_min = S_min B_noise

  calibrated by one reference point ``E_ref`` at batch ``B_ref``:
  ``E_min = E_ref / (1 + B_ref / B_noise)``.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, field
from typing import Iterable, Sequence

import numpy as np
from scipy.optimize import nnls  # at import, not on the first fit: module import time is not planning time

from core.json_edge import JsonObject
from serverless.invocation import LAMBDA_MB_PER_VCPU
from serverless.run_shape import RunShape


@dataclass(frozen=True)
class Observation:
    """One measured (or modelled-by-the-emulator) training iteration at a RunShape.

    ``rollout_s`` is the Lambda-clock time of the rollout phase (modelled on the local
    emulator), ``billed_s`` the mean billed duration of one invocation, ``learner_s``
    the learner's update time, ``iteration_s`` the Lambda-clock iteration time.
    ``rollout_only`` rows come from the memory probe (invocations without a learner
    update): they inform the rollout and billed fits, not the learner's.
    ``learner_only`` rows time the learner's update alone at a batch (the profile's
    learner timing, :func:`optimizers.seraph.pilot.time_learner_updates`): they
    inform the learner fit only.
    """

    shape: RunShape
    rollout_s: float
    billed_s: float
    learner_s: float
    iteration_s: float
    cold: bool = False
    rollout_only: bool = False
    learner_only: bool = False
    #: the handler's duration as measured, not rounded up to the billing unit (probe rows)
    duration_s: float | None = None

    def as_dict(self) -> JsonObject:
        d = asdict(self)
        d["shape"] = self.shape.to_dict()
        return d

    @classmethod
    def from_dict(cls, d: JsonObject) -> "Observation":
        return cls(**{**d, "shape": RunShape.from_dict(d["shape"])})


def _mdape(pred: Sequence[float], actual: Sequence[float]) -> float:
    errs = [abs(p - a) / a for p, a in zip(pred, actual) if a > 0]
    return float(np.median(errs)) if errs else float("nan")


def share_floor(memory_mb: int, base_mb: int, vcpu_mb: int = LAMBDA_MB_PER_VCPU) -> float:
    """The least per-step time a size can have relative to ``base_mb``: its CPU share's.

    Lambda gives a function CPU in proportion to its memory up to one vCPU at 1,769 MB
    (ARCHITECTURE.md), so below one vCPU a handler cannot run faster per step than
    ``min(base, vCPU) / memory`` times the base size's time. A probe call that says
    otherwise measured noise: one warm CartPole call is about 7.5 ms of CPU at one vCPU,
    and 30 saved CartPole profiles read 885 MB at 1.45-3.31x 1,769 MB's per-step time,
    many under the share's 2x. Read low, it makes 885 MB look cheaper per GB-second than
    it can be, and cost plans went to 885 MB at near-ties (two CartPole benchmark runs,
    seed 1 both times), which the runs found 10-20% dearer per iteration than 1,769 MB.
    Above one vCPU the share gives no bound for a handler that may use several threads,
    so there is none (0)."""
    if memory_mb >= min(base_mb, vcpu_mb):
        return 0.0
    return min(base_mb, vcpu_mb) / memory_mb


@dataclass
class PerformanceModel:
    memory_levels: list[int]
    rollout_coef: dict[str, float]  # "overhead", "log2_actors", "k@<mem>"
    billed_coef: dict[str, float]  # "overhead", "k@<mem>"
    learner_coef: tuple[float, float]
    other_coef: tuple[float, float]
    fit_error: dict[str, float] = field(default_factory=dict)

    # ---- fitting -------------------------------------------------------------------
    @staticmethod
    def _rollout_row(shape: RunShape, levels: list[int]) -> list[float]:
        row = [1.0, math.log2(shape.actors)]
        row += [shape.batch / shape.actors if m == shape.memory_mb else 0.0 for m in levels]
        return row

    @staticmethod
    def _billed_row(shape: RunShape, levels: list[int]) -> list[float]:
        return [1.0] + [shape.batch / shape.actors if m == shape.memory_mb else 0.0 for m in levels]

    @classmethod
    def _fit_rollout(cls, rows: Sequence[Observation]) -> tuple[list[int], dict[str, float], dict[str, float]]:
        """Joint least squares of rollout and billed time over ``rows`` (one k per memory)."""
        levels = sorted({o.shape.memory_mb for o in rows})
        warm = [o for o in rows if not o.cold] or list(rows)
        coef = _nonneg_lstsq(np.array([cls._rollout_row(o.shape, levels) for o in warm]), np.array([o.rollout_s for o in warm]))
        rollout = {"overhead": coef[0], "log2_actors": coef[1]} | {f"k@{m}": coef[2 + i] for i, m in enumerate(levels)}
        cb = _nonneg_lstsq(np.array([cls._billed_row(o.shape, levels) for o in warm]), np.array([o.billed_s for o in warm]))
        billed = {"overhead": cb[0]} | {f"k@{m}": cb[1 + i] for i, m in enumerate(levels)}
        return levels, rollout, billed

    @staticmethod
    def _probe_ratios(probe: Sequence[Observation], base: int) -> dict[int, float] | None:
        """Per-step time at each probed size relative to ``base``, from the probe's handler
        durations (the handler alone: no invocation overhead to dilute the ratio), as
        measured where the row has them, else billed (rounded up to the billing unit); never
        below the size's CPU-share bound (:func:`share_floor`)."""
        per_step = {o.shape.memory_mb: (o.duration_s if o.duration_s is not None else o.billed_s) / o.shape.steps_per_actor
                    for o in probe}
        if per_step.get(base, 0.0) <= 0:
            return None
        return {m: max(v / per_step[base], share_floor(m, base)) for m, v in per_step.items()}

    @staticmethod
    def _fit_learner(trained: Sequence[Observation], timed: Sequence[Observation]) -> np.ndarray:
        """``l0 + l1 * B``. With the learner timed at two or more batches, the line's shape
        comes from the timing and its level from training (the median ratio of the trained
        iterations' learner time to the timed line at their batches): the timing runs one
        update on a synthetic batch, training runs many on real ones, and only training
        says what an update costs in the run. Without a timing, a line through the trained
        iterations."""
        if len({o.shape.batch for o in timed}) >= 2:
            line = _nonneg_lstsq(np.array([[1.0, o.shape.batch] for o in timed]), np.array([o.learner_s for o in timed]))
            ratios = [o.learner_s / p for o in trained if (p := line[0] + line[1] * o.shape.batch) > 0]
            return np.asarray(line, dtype=float) * (float(np.median(ratios)) if ratios else 1.0)
        return _nonneg_lstsq(np.array([[1.0, o.shape.batch] for o in trained]), np.array([o.learner_s for o in trained]))

    @classmethod
    def _fit_once(cls, obs: Sequence[Observation]) -> "PerformanceModel":
        trained = [o for o in obs if not o.rollout_only and not o.learner_only]
        if not trained:
            raise ValueError("need at least one training iteration (not only memory-probe rows) to fit the learner")
        probe = [o for o in obs if o.rollout_only]
        trained_levels = sorted({o.shape.memory_mb for o in trained})
        common = [m for m in trained_levels if any(o.shape.memory_mb == m for o in probe)]
        base = 1769 if 1769 in common else (common[0] if common else None)
        ratios = None if base is None else cls._probe_ratios(probe, base)
        if ratios is not None:
            # The probe ran every size with one function each, under the same conditions;
            # training ran 1 to 16 functions sharing this machine's cores, which shifts
            # per-step times. So a size the training never ran is compared with the base
            # size within the probe and levelled by the training: k@m = k@base x ratio.
            levels, rollout, billed = cls._fit_rollout(trained)
            for m, r in ratios.items():
                if m not in trained_levels:
                    rollout[f"k@{m}"] = rollout[f"k@{base}"] * r
                    billed[f"k@{m}"] = billed[f"k@{base}"] * r
            levels = sorted({*levels, *ratios})
        else:
            levels, rollout, billed = cls._fit_rollout([o for o in obs if not o.learner_only])
        trained_warm = [o for o in trained if not o.cold] or trained
        cl = cls._fit_learner(trained, [o for o in obs if o.learner_only])
        Xo = np.array([[1.0, o.shape.batch] for o in trained_warm])
        co = _nonneg_lstsq(Xo, np.array([max(o.iteration_s - o.rollout_s - o.learner_s, 0.0) for o in trained_warm]))
        return cls(levels, rollout, billed, (float(cl[0]), float(cl[1])), (float(co[0]), float(co[1])))

    @classmethod
    def fit(cls, obs: Sequence[Observation]) -> "PerformanceModel":
        """Fit on all observations; report in-sample and leave-one-out errors."""
        if len(obs) < 3:
            raise ValueError(f"need at least 3 observations to fit the performance model, got {len(obs)}")
        model = cls._fit_once(obs)
        warm = [o for o in obs if not o.cold and not o.rollout_only and not o.learner_only]
        model.fit_error = {
            "iteration_s_mdape_in_sample": _mdape([model.iteration_s(o.shape) for o in warm], [o.iteration_s for o in warm]),
            "observations": float(len(obs)),
        }
        loo_pred, loo_act = [], []
        for i, o in enumerate(warm):
            rest = [p for p in obs if p is not o]
            if not any(p.shape.memory_mb == o.shape.memory_mb and not p.cold and not p.learner_only for p in rest):
                continue  # the memory level has no other point: cannot be predicted
            try:
                loo_pred.append(cls._fit_once(rest).iteration_s(o.shape))
                loo_act.append(o.iteration_s)
            except ValueError:
                continue
        if loo_pred:
            model.fit_error["iteration_s_mdape_leave_one_out"] = _mdape(loo_pred, loo_act)
        return model

    # ---- prediction ----------------------------------------------------------------
    def _k(self, coef: dict[str, float], memory_mb: int) -> float:
        key = f"k@{memory_mb}"
        if key in coef:
            return coef[key]
        # Between profiled sizes: seconds per step scale with 1/CPU share, interpolate in log space.
        levels = self.memory_levels
        lo = max([m for m in levels if m <= memory_mb], default=levels[0])
        hi = min([m for m in levels if m >= memory_mb], default=levels[-1])
        if lo == hi:
            return coef[f"k@{lo}"] * (lo / memory_mb if memory_mb < lo else 1.0)
        t = (math.log(memory_mb) - math.log(lo)) / (math.log(hi) - math.log(lo))
        k_lo, k_hi = max(coef[f"k@{lo}"], 1e-12), max(coef[f"k@{hi}"], 1e-12)
        return float(math.exp((1 - t) * math.log(k_lo) + t * math.log(k_hi)))

    def rollout_s(self, s: RunShape) -> float:
        c = self.rollout_coef
        return c["overhead"] + c["log2_actors"] * math.log2(s.actors) + self._k(c, s.memory_mb) * s.steps_per_actor

    def billed_s(self, s: RunShape) -> float:
        c = self.billed_coef
        return c["overhead"] + self._k(c, s.memory_mb) * s.steps_per_actor

    def learner_s(self, s: RunShape) -> float:
        return self.learner_coef[0] + self.learner_coef[1] * s.batch

    def other_s(self, s: RunShape) -> float:
        return self.other_coef[0] + self.other_coef[1] * s.batch

    def iteration_s(self, s: RunShape) -> float:
        return self.rollout_s(s) + self.learner_s(s) + self.other_s(s)

    def steps_per_s(self, memory_mb: int) -> float:
        k = self._k(self.rollout_coef, memory_mb)
        return float("inf") if k <= 0 else 1.0 / k

    def as_dict(self) -> JsonObject:
        return {
            "memory_levels": self.memory_levels,
            "rollout_coef": self.rollout_coef,
            "billed_coef": self.billed_coef,
            "learner_coef": list(self.learner_coef),
            "other_coef": list(self.other_coef),
            "fit_error": self.fit_error,
            # None where the fit found no per-step time (k = 0: overhead explained every batch)
            "steps_per_s_per_function": {str(m): (r if math.isfinite(r := self.steps_per_s(m)) else None)
                                         for m in self.memory_levels},
        }


def _nonneg_lstsq(X: np.ndarray, y: np.ndarray) -> list[float]:
    """Least squares with non-negative coefficients (scipy's NNLS): times never shrink
    with more work, and a negative overhead would be nonsense outside the data."""
    if len(y) == 0:
        raise ValueError("no observations")
    coef, _ = nnls(X, y)
    return [float(c) for c in coef]


@dataclass(frozen=True)
class Prices:
    """The prices the cost model needs (mirrors the trainer's price table)."""

    gb_second_usd: float = 0.0000166667  # AWS Lambda x86, us-east-1, first tier
    request_usd: float = 0.20 / 1_000_000
    learner_usd_per_s: float = 0.0
    learner_billing: str = "wall"  # "wall": the learner VM is paid for the whole iteration; "busy": only while updating
    source: str = "AWS Lambda public price list (x86, us-east-1)"
    warnings: tuple[str, ...] = ()  # the price table's: a region it has no table for, a stale table

    def as_dict(self) -> JsonObject:
        return {**asdict(self), "warnings": list(self.warnings)}


@dataclass
class CostModel:
    perf: PerformanceModel
    prices: Prices

    def iteration_cost(self, s: RunShape) -> float:
        p = self.prices
        gb_s = s.actors * math.ceil(self.perf.billed_s(s) * 1000) / 1000 * s.memory_mb / 1024
        fn = gb_s * p.gb_second_usd + s.actors * p.request_usd
        learner_time = self.perf.iteration_s(s) if p.learner_billing == "wall" else self.perf.learner_s(s)
        return fn + learner_time * p.learner_usd_per_s

    def per_step_cost(self, s: RunShape) -> float:
        """Modelled cost of one env step at ``s``: an iteration's cost over its batch."""
        return self.iteration_cost(s) / s.batch

    def per_step_floor(self) -> JsonObject:
        """The least modelled cost per env step that any shape can reach, and where it comes from.

        Every env step costs at least its share of function compute and of the learner's
        update, whatever the shape:

        * **function compute**: ``k'_m x m / 1024`` GB-seconds at the memory size with the
          cheapest GB-seconds per step. No invocation overhead is counted (it is spread over
          an ever larger fragment) and no billing round-up;
        * **learner update**: ``l1`` seconds of the learner VM per sample (the update's time
          grows with the batch: PPO's epochs over minibatches of a fixed size), at the VM's
          price. No fixed part per update is counted.

        Not counted: requests, invocation overhead and the learner VM's time while the actors
        roll out (a large enough batch over enough functions makes them small), and the
        batch assembly (``other_s``, a few percent of the update). Each only adds, so a
        shape's :meth:`per_step_cost` is never below this floor, and the static default's
        excess over it bounds what a plan can save per env step: a cost saving beyond that
        needs fewer env steps to the target.
        """
        p, perf = self.prices, self.perf
        per_gb_s = {m: perf._k(perf.billed_coef, m) * m / 1024 * p.gb_second_usd for m in perf.memory_levels}
        cheapest = min(per_gb_s, key=per_gb_s.get)
        learner = perf.learner_coef[1] * p.learner_usd_per_s
        return {
            "usd_per_step": per_gb_s[cheapest] + learner,
            "function_compute_usd_per_step": per_gb_s[cheapest],
            "cheapest_memory_mb": cheapest,
            "learner_update_usd_per_step": learner,
        }

    def breakdown(self, s: RunShape) -> dict[str, float]:
        p = self.prices
        gb_s = s.actors * self.perf.billed_s(s) * s.memory_mb / 1024
        learner_time = self.perf.iteration_s(s) if p.learner_billing == "wall" else self.perf.learner_s(s)
        return {
            "function_gb_s_usd": gb_s * p.gb_second_usd,
            "requests_usd": s.actors * p.request_usd,
            "learner_vm_usd": learner_time * p.learner_usd_per_s,
        }


@dataclass
class ProgressModel:
    """Env steps to the target as a function of the batch (McCandlish et al. 2018).

    ``E(B) = E_min (1 + B / B_noise)``, times an optional measured ``residual``: pairs
    ``(batch, measured / curve)`` at the batches where steps-to-target were measured,
    interpolated in log-batch and held flat beyond the ends. With it the model passes
    through the measured points (the curve's B_noise still sets how they move when the
    live noise scale grows); without it, it is the plain curve.
    """

    b_noise: float
    e_min: float
    residual: tuple[tuple[float, float], ...] = ()

    @classmethod
    def calibrate(cls, b_noise: float, e_ref: float, b_ref: float) -> "ProgressModel":
        if b_noise <= 0 or e_ref <= 0 or b_ref <= 0:
            raise ValueError("b_noise, e_ref and b_ref must be positive")
        return cls(b_noise=b_noise, e_min=e_ref / (1.0 + b_ref / b_noise))

    @classmethod
    def through_points(cls, b_noise: float, e_min: float, points: Sequence[tuple[float, float]]) -> "ProgressModel":
        """The curve ``(b_noise, e_min)`` corrected to pass through measured ``(batch, steps)``."""
        curve = cls(b_noise, e_min)
        residual = tuple(sorted((float(b), float(e) / curve.env_steps(b)) for b, e in points))
        return cls(b_noise, e_min, residual)

    @property
    def s_min(self) -> float:
        return self.e_min / self.b_noise

    def _residual_at(self, batch: float) -> float:
        pts = self.residual
        if not pts:
            return 1.0
        if batch <= pts[0][0]:
            return pts[0][1]
        if batch >= pts[-1][0]:
            return pts[-1][1]
        xs = [math.log(b) for b, _ in pts]
        ys = [math.log(r) for _, r in pts]
        return math.exp(float(np.interp(math.log(batch), xs, ys)))

    def env_steps(self, batch: float) -> float:
        return self.e_min * (1.0 + batch / self.b_noise) * self._residual_at(batch)

    def updates(self, batch: float) -> float:
        return self.env_steps(batch) / batch

    def scaled(self, remaining_fraction: float) -> "ProgressModel":
        """The same curve for the part of training still to go."""
        return ProgressModel(self.b_noise, self.e_min * max(remaining_fraction, 0.0), self.residual)

    def as_dict(self) -> JsonObject:
        d: JsonObject = {"b_noise": self.b_noise, "e_min": self.e_min, "s_min": self.s_min}
        if self.residual:
            d["residual"] = [list(p) for p in self.residual]
        return d


def all_shapes(
    actors: Iterable[int], memories: Iterable[int], batches: Iterable[int], *, min_steps_per_actor: int
) -> list[RunShape]:
    """The discrete search space, without shapes whose per-actor fragment is too short."""
    out = []
    for b in batches:
        for a in actors:
            if b / a < min_steps_per_actor:
                continue
            for m in memories:
                out.append(RunShape(int(a), int(m), int(b)))
    return out
