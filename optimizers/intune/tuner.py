"""InTune as an ask/tell optimizer: a model-best start, then agent-ranked steps on live measurements.

1. **Start** at the best memory-safe configuration of the belief model (the calibrated
   simulator): exhaustive on the model when the grid is small, else steepest ascent. When the
   grid is small it then also measures the model's best configuration of each other CPU split
   (the tuple of the CPU knobs' values) that the model predicts within ``START_BAND`` (15%) of
   its best, up to ``START_SPLITS`` (3) splits in all (:func:`start_candidates`): near-ties that
   the model cannot rank (its error is about that size) are settled by measurement before the
   local search starts from the best of them.
2. **Live steps**, best-first: take the best measured configuration that has had fewer than
   ``branch`` moves tried from it; rank its valid moves (mask: in the space, within the CPU
   budget, predicted memory under the margin, never an out-of-memory configuration, never one
   already measured) by the agent's Q-value plus ``model_weight`` times the model's predicted log
   gain, and propose the top one. Expanding second-best configurations too lets the search take
   two-step paths that a single greedy step would reject.
3. **Online refit and jumps**: after every measurement the model is re-fitted to all live
   measurements (with fewer than three, only its level: one factor on every cost, so the level
   follows the machine's speed from the first measurement on); if the re-fitted model, climbing from the best measured configuration, finds an
   unmeasured one it predicts to be better by more than ``min_gain``, that is proposed first.
4. **Online fine-tuning**: every live transition goes into the agent's replay buffer with its
   reward, and the agent takes a few gradient steps, so it adapts to the real pipeline.
5. **Stall escape**: when the search stalls (``patience`` live steps without improvement, the
   agent ranking "stop" first after half that, or no valid unmeasured move left), it does not
   stop yet. It forms the *plausible models*: the re-fitted model and, per cost factor, that
   factor pushed down and up as far as the live measurements allow (their fit may worsen by
   ``escape_slack`` squared log error per point; a stage that was never the bottleneck in any
   measurement keeps a wide range). Of the unmeasured configurations within ``escape_depth``
   (3) moves of the best measured one, it proposes the one with the largest predicted gain over
   that best under any plausible model, if above ``min_gain`` (at most ``max_escapes`` in all).
   This reaches a better configuration that needs several moves whose single steps each
   measure worse, using only the model and the tuner's own measurements.
6. **Confirm, then stop**: when it stops (stall with no escape left, ``max_steps``, or the next
   step would not fit in ``finish_share`` of the time budget), it measures once more the
   ``confirm_top`` (3) best configurations that measured within ``confirm_band`` of the best,
   and, if those share one CPU split, the best configuration of another split that measured
   within ``confirm_split_band`` (25%), as many as fit in the rest of the budget. Its recommendation (``best``) is the best by the
   mean of each configuration's measurements, so one lucky short measurement does not decide.
7. **Settle a near-tie**: the confirmation measures its candidates back to back, so those
   measurements are paired in time (a drift of the machine hits them alike), while a search
   measurement of the same configuration may be minutes older and was selected for being high.
   Once two or more candidates have confirmation measurements, the recommendation is the best by
   the mean of those *paired* measurements only. If the two best of them are within
   ``settle_band`` (10%), they are measured once more each in the reverse order (A, B, ... B, A:
   a linear drift cancels) when that fits in the budget; the search stops early enough to leave
   room for the confirmation and this settle (``_stop_reason``). While they stay that close and
   the budget has room, up to ``settle_rounds`` (3) such pairs are measured, each in the order
   opposite to the one before: a search that stopped early spends what is left where a noisy
   pipeline's pick goes wrong, instead of returning early.
8. **Time budget**: every check of what still fits assumes the next measurement takes as long as
   the longest recent one (one that paid the measuring worker's restart after a failure counts
   only while the last measurement failed), the search keeps for the end only what the
   confirmation of the current near-ties needs (``_confirm_reserve``), and a confirmation that no
   longer fits is not started, so a run ends within its budget.
"""

from __future__ import annotations

import math
import time
from typing import Any, Callable, Mapping

import numpy as np

from ingestion.knobs import KnobSpace
from ingestion.node import Node
from ingestion.simulator import PipelineModel, simulate
from ingestion.measurement import Config, Measurement
from optimizers.intune.agent import MaskedDQN
from optimizers.intune.env import ACTIONS, RESIDUAL_CLIP, STOP, Masker, apply_action, observe
from optimizers.intune.failures import FailureRules, is_memory_failure
from optimizers.intune.settings import InTuneSettings

#: How far ``_plausible_models`` stretches one cost factor (relative steps, tried in order).
ESCAPE_STRETCH = (0.1, 0.2, 0.3, 0.4)
#: Share of the time budget the confirmation measurements must end within (a margin for a slow one).
CONFIRM_SHARE = 0.97
#: Stop reasons after which the tuner first tries an escape (``InTuneOptimizer._escape``).
STALLED = ("no improvement", "agent chose stop", "no valid unmeasured neighbour left")
#: The live start also measures the model's best configuration of each other CPU split that the
#: model predicts within this share of its best (``start_candidates``).
START_BAND = 0.15
#: At most this many distinct CPU splits (the model's best included) are measured at the start.
START_SPLITS = 3
#: Measurements of a near-tie settle (the two finalists once more each, in reverse order).
SETTLE_MEASUREMENTS = 2
#: Factor values the first full re-fit tries per cost factor, and the relative steps of later ones.
REFIT_VALUES = (0.5, 0.65, 0.8, 0.9, 1.0, 1.1, 1.25, 1.5, 2.0)
REFIT_STEPS = (0.8, 0.9, 1.1, 1.25)
#: The model is re-fitted to at most this many live measurements (``_live_points``).
FIT_POINTS = 12
#: Exploration looks at every unmeasured configuration of a grid up to this size (else near the best).
EXPLORE_GRID = 2000
#: Exploration scores this many candidates (the belief's best) under every plausible model.
EXPLORE_SHORTLIST = 48


def model_best(
    model: PipelineModel, space: KnobSpace, node: Node, masker: Masker, *, exhaustive_limit: int = 4000
) -> tuple[Config, str]:
    """The model's best memory-safe configuration and how it was found: exhaustive search when
    the grid is small, otherwise steepest ascent over single moves from the initial configuration."""
    if space.grid_size() <= exhaustive_limit:
        best, best_x = space.initial(), -math.inf
        for config in space.grid():
            if not masker.safe(config):
                continue
            x = simulate(model, config, node).score
            if x > best_x:
                best, best_x = config, x
        return best, "exhaustive search on the calibrated simulator"
    current = space.initial()
    current_x = simulate(model, current, node).score
    while True:
        scored = [(simulate(model, c, node).score, c) for i, c in enumerate(masker.targets(current))
                  if c is not None and i != STOP]
        if not scored:
            break
        x, c = max(scored, key=lambda xc: xc[0])
        if x <= current_x:
            break
        current, current_x = c, x
    return current, "steepest ascent on the calibrated simulator"


def cpu_split(space: KnobSpace, config: Mapping[str, int]) -> tuple:
    """A configuration's CPU split: the values of its CPU knobs."""
    return tuple(config[k.name] for k in space.cpu_knobs)


def start_candidates(
    model: PipelineModel, space: KnobSpace, node: Node, masker: Masker, *, band: float = START_BAND,
    count: int = START_SPLITS, exhaustive_limit: int = 4000,
) -> list[Config]:
    """The model's best memory-safe configuration of each distinct CPU split, best first, those it
    predicts within ``band`` of its overall best, at most ``count`` (empty for a large grid)."""
    if space.grid_size() > exhaustive_limit:
        return []
    scored = sorted(((simulate(model, c, node).score, c) for c in space.grid() if masker.safe(c)),
                    key=lambda xc: -xc[0])
    if not scored:
        return []
    floor = scored[0][0] * (1.0 - band)
    chosen: dict[tuple, Config] = {}
    for x, c in scored:
        if x < floor or len(chosen) >= count:
            break
        chosen.setdefault(cpu_split(space, c), c)
    return list(chosen.values())


class InTuneOptimizer:
    """Ask/tell InTune (see the module docstring)."""

    name = "intune"

    def __init__(
        self,
        space: KnobSpace,
        node: Node,
        belief: PipelineModel,
        agent: MaskedDQN,
        settings: InTuneSettings = InTuneSettings(),
        *,
        start: Config | None = None,
        start_source: str = "given",
        time_budget_s: float | None = None,
        clock: Callable[[], float] = time.monotonic,
        on_finish: Callable[["InTuneOptimizer"], None] | None = None,
    ):
        self.space, self.node, self.belief, self.agent = space, node, belief, agent
        self.settings = settings
        self.failures = FailureRules(space)
        self.masker = Masker(space, node, belief, settings.memory_margin)
        self.masker.predicts_failure = lambda c: self.failures.predicted(c) >= 2
        alternatives: list[Config] = []
        if start is None:
            # one exhaustive pass on a small grid gives the model's best (first) and the other
            # near-tied CPU splits; a large grid has none and climbs to the model's best instead
            candidates = start_candidates(belief, space, node, self.masker)
            if candidates:
                start, start_source = candidates[0], "exhaustive search on the calibrated simulator"
                alternatives = candidates[1:]
            else:
                start, start_source = model_best(belief, space, node, self.masker)
        self.start, self.start_source = dict(start), start_source
        #: Other CPU splits the model ranks within ``START_BAND`` of its best: measured right after the start.
        self.start_alternatives = [dict(c) for c in alternatives]
        self.start_queue = [dict(c) for c in alternatives]
        self.time_budget_s = time_budget_s
        self.prior = belief
        self.jumps = 0
        self.escapes = 0
        self.explorations = 0
        self.confirm_queue: list[Config] | None = None
        self.confirm_reason = ""
        self.confirm_order: list[tuple] = []
        #: Measurements taken back to back in the confirmation and settle (per configuration).
        self.paired: dict[tuple, list[float]] = {}
        self.settle: list[Config] = []  # the current settle round's queue
        self.settle_rounds = 0  # settle rounds decided so far
        self.samples: dict[tuple, list[float]] = {}
        self.refit_factors: list[float] = []
        self.expanded: dict[tuple, int] = {}
        self.clock, self.on_finish = clock, on_finish
        self.visited: dict[tuple, Measurement] = {}
        self.current: Config | None = None
        self.current_m: Measurement | None = None
        self.start_x = 1e-9
        self.pending: tuple[np.ndarray, int, Measurement, Config] | None = None
        self.no_improve = 0
        self.steps = 0
        self.t0: float | None = None
        self.durations: list[float] = []
        self.last_ask: float | None = None
        self.finished: str | None = None
        self.history: list[dict[str, Any]] = []

    # -- ask/tell ---------------------------------------------------------------------------
    def ask(self) -> Config | None:
        now = self.clock()
        if self.t0 is None:
            self.t0 = now
        if self.finished:
            return None
        self.last_ask = now
        if self.current is None:
            first = self._next_start()
            return first if first is not None else self._finish("every start candidate failed")
        self.start_queue = [c for c in self.start_queue if Masker.key(c) not in self.visited and self.masker.safe(c)]
        if self.start_queue:
            return self.start_queue.pop(0)
        if self.confirm_queue is not None:
            if self.confirm_queue and self._fits():
                return self.confirm_queue.pop(0)
            if not self.settle and self.settle_rounds < self.settings.settle_rounds:
                self.settle = self._settle_queue()  # another pair while the top two are near-tied
                self.settle_rounds += 1
            return self.settle.pop(0) if self.settle else self._finish(self.confirm_reason)  # budgeted as a pair
        reason = self._stop_reason(now)
        if reason:
            return self._escape_or_finish(reason)
        jump = self._model_jump()
        if jump is not None:
            self.pending = None
            self.jumps += 1
            return jump
        # Best-first: expand the best measured configuration that still has untried moves.
        bases = sorted((kv for kv in self.visited.items() if not kv[1].oom), key=lambda kv: -kv[1].rows_per_s)
        for rank, (key, m) in enumerate(bases):
            if self.expanded.get(key, 0) >= self.settings.branch:
                continue
            base = dict(key)
            obs = self._obs(base, m, improved=self.no_improve == 0)
            ranked = self._rank(base, obs, self.masker.mask(base, exclude=self.visited.keys()))
            moves = [a for a in ranked if a != STOP]
            if self.settings.use_agent and rank == 0 and ranked[0] == STOP and self.no_improve >= self.settings.patience // 2:
                return self._escape_or_finish("agent chose stop")
            if not moves:
                self.expanded[key] = self.settings.branch
                continue
            self.expanded[key] = self.expanded.get(key, 0) + 1
            target = apply_action(self.space, base, ACTIONS[moves[0]])
            assert target is not None
            self.pending = (obs, moves[0], m, base)
            return target
        return self._escape_or_finish("no valid unmeasured neighbour left")

    def tell(self, config: Config, measurement: Measurement) -> None:
        now = self.clock()
        if self.last_ask is not None:
            self.durations.append(now - self.last_ask)
        key = Masker.key(config)
        if key in self.visited:
            self._tell_repeat(config, measurement)
            return
        self.samples[key] = [measurement.rows_per_s]
        self.visited[key] = measurement
        self._learn_failure(config, measurement)
        self.history.append({"config": dict(config), "rows_per_s": measurement.rows_per_s, "oom": measurement.oom,
                             **({"failure": str(measurement.extra.get("failure"))} if measurement.oom else {})})
        if self.current is None:
            if measurement.oom:  # the start failed: the next start candidate is tried (``_next_start``)
                return
            self.current, self.current_m = dict(config), measurement
            self.start_x = max(measurement.rows_per_s, 1e-9)
            self._refit()  # the level, from this first measurement
            return
        self.steps += 1
        x = max(measurement.rows_per_s, 1e-9)
        if self.pending is not None:
            self._finetune(config, measurement)
        self._refit()
        assert self.current_m is not None
        if not measurement.oom and x > max(self.current_m.rows_per_s, 1e-9) * (1.0 + self.settings.min_gain):
            self.current, self.current_m = dict(config), measurement
            self.no_improve = 0
        elif all(Masker.key(c) != key for c in self.start_alternatives):  # the start's own measurements are no stall
            self.no_improve += 1

    def _finetune(self, config: Config, measurement: Measurement) -> None:
        """The pending move's transition into the agent's replay buffer, its reward the residual
        (measured log gain minus the model's predicted one, as in pre-training), and a few
        gradient steps (only when the agent is used)."""
        assert self.pending is not None
        obs, action, base_m, base = self.pending
        self.pending = None
        if not self.settings.use_agent:
            return
        base_x = max(base_m.rows_per_s, 1e-9)
        predicted = math.log(max(simulate(self.belief, config, self.node).rows_per_s, 1e-9)
                             / max(simulate(self.belief, base, self.node).rows_per_s, 1e-9))
        actual = -RESIDUAL_CLIP if measurement.oom else math.log(max(measurement.rows_per_s, 1e-9) / base_x)
        reward = float(np.clip(actual - predicted, -RESIDUAL_CLIP, RESIDUAL_CLIP))
        next_mask = np.eye(len(ACTIONS), dtype=bool)[STOP]
        self.agent.remember(obs, action, reward, obs, True, next_mask)
        if self.settings.finetune_steps:
            self.agent.learn(self.settings.finetune_steps, min_size=8)

    def _live_points(self) -> list[tuple[Config, float]]:
        """The live measurements the model is fitted to, as (configuration, rows/s): those that ran,
        at most ``FIT_POINTS`` of them (the best half and the most recent half), so a long search
        costs the same per step."""
        ran = [(k, m.rows_per_s) for k, m in self.visited.items() if not m.oom and m.rows_per_s > 0]
        if len(ran) > FIT_POINTS:
            best = sorted(ran, key=lambda kx: -kx[1])[: FIT_POINTS // 2]
            keys = {k for k, _ in best}
            ran = best + [kx for kx in ran if kx[0] not in keys][-(FIT_POINTS - len(best)):]
        return [(dict(k), x) for k, x in ran]

    def _scaled_model(self, factors: list[float]) -> PipelineModel:
        """The prior model with ``factors``: [all costs, per-call costs, then one per parallel stage]."""
        from dataclasses import replace

        parallel = [i for i, st in enumerate(self.prior.stages) if st.threads_knob]
        scale = [factors[0]] * len(self.prior.stages)
        for f, i in zip(factors[2:], parallel):
            scale[i] *= f
        return replace(self.prior, stages=tuple(
            replace(st, cpu_s_per_row=st.cpu_s_per_row * k, cpu_s_per_call=st.cpu_s_per_call * k * factors[1],
                    wait_s_per_row=st.wait_s_per_row * k) for st, k in zip(self.prior.stages, scale)))

    def _fit_error(self, factors: list[float], points: list[tuple[Config, float]]) -> float:
        """Squared log error of the model with ``factors`` over the live ``points``."""
        model = self._scaled_model(factors)
        return sum(math.log(max(simulate(model, c, self.node).rows_per_s, 1e-9) / x) ** 2 for c, x in points)

    def _tell_repeat(self, config: Config, measurement: Measurement) -> None:
        """A configuration measured again (``_confirm_or_finish``): its estimate becomes the mean
        of its measurements; the search state (current, patience) is left alone."""
        from dataclasses import replace

        key = Masker.key(config)
        self.steps += 1
        self.history.append({"config": dict(config), "rows_per_s": measurement.rows_per_s, "oom": measurement.oom,
                             "repeat": True})
        if measurement.oom:  # ran out of memory this time: never recommend it
            self.visited[key] = measurement
            self.masker.forbidden.add(key)
            return
        self.samples[key].append(measurement.rows_per_s)
        if self.confirm_queue is not None:
            self.paired.setdefault(key, []).append(measurement.rows_per_s)
        mean = float(np.mean(self.samples[key]))
        self.visited[key] = replace(measurement, rows_per_s=mean, extra={**dict(measurement.extra), "samples": list(self.samples[key])})
        self._refit()

    def _refit(self) -> None:
        """Re-fit the belief to the live measurements: a factor on all costs, one on per-call costs
        and one per parallel stage, by coordinate descent on squared log error with a weak prior."""
        points = self._live_points()
        if not points or not self.settings.refit:
            return
        n_parallel = sum(1 for st in self.prior.stages if st.threads_knob)
        factors = [1.0] * (2 + n_parallel)
        if len(points) < 3:  # too few for per-stage factors: the level only (the machine's speed now)
            for _ in range(2):  # the hand-off costs are not scaled, so a second step refines the first
                model = self._scaled_model(factors)
                ratio = float(np.mean([math.log(max(simulate(model, c, self.node).rows_per_s, 1e-9) / x)
                                       for c, x in points]))
                factors[0] = min(4.0, max(0.25, factors[0] * math.exp(ratio)))
            self.belief = self._scaled_model(factors)
            self.masker.belief = self.belief
            self.refit_factors = factors
            return

        def loss(fs: list[float]) -> float:
            return self._fit_error(fs, points) + 0.02 * sum(math.log(f) ** 2 for f in fs)

        warm = len(self.refit_factors) == len(factors) and len(points) > 3
        if warm:  # start from the last fit and search around it: one new point moves it a little
            factors = list(self.refit_factors)
        best = loss(factors)
        for _ in range(1 if warm else 2):
            for d in range(len(factors)):
                values = [factors[d] * r for r in REFIT_STEPS] if warm else REFIT_VALUES
                for f in values:
                    trial = factors[:d] + [min(4.0, max(0.25, f))] + factors[d + 1:]
                    value = loss(trial)
                    if value < best - 1e-12:
                        best, factors = value, trial
        self.belief = self._scaled_model(factors)
        self.masker.belief = self.belief
        self.refit_factors = factors

    def _plausible_models(self) -> list[PipelineModel]:
        """The re-fitted model and, per cost factor but the global one, that factor pushed as far
        down and as far up (by up to ``ESCAPE_STRETCH``) as the live measurements allow: the fit's
        squared log error may grow by at most ``escape_slack`` per point. A stage that was never the
        bottleneck in any measurement keeps a wide range, one that was is pinned by the data."""
        if not self.refit_factors:
            return [self.belief]
        points = self._live_points()
        fitted = list(self.refit_factors)
        allowed = self._fit_error(fitted, points) + self.settings.escape_slack * len(points)
        models = [self.belief]
        for d in range(1, len(fitted)):
            for direction in (-1, 1):
                furthest = None
                for stretch in ESCAPE_STRETCH:
                    trial = fitted[:d] + [fitted[d] * (1.0 + direction * stretch)] + fitted[d + 1:]
                    if self._fit_error(trial, points) > allowed:
                        break
                    furthest = trial
                if furthest is not None:
                    models.append(self._scaled_model(furthest))
        return models

    def _within_moves(self, base: Config, depth: int) -> list[Config]:
        """Every valid, memory-safe configuration at most ``depth`` moves from ``base`` (not base)."""
        seen = {Masker.key(base)}
        frontier, found = [base], []
        for _ in range(depth):
            following = []
            for config in frontier:
                for i, target in enumerate(self.masker.targets(config)):
                    if target is None or i == STOP or Masker.key(target) in seen:
                        continue
                    seen.add(Masker.key(target))
                    following.append(target)
            found += following
            frontier = following
        return found

    def _escape(self) -> Config | None:
        """When the search stalls: the unmeasured configuration within ``escape_depth`` moves of
        the best measured one with the largest predicted gain over it under any plausible model
        (``_plausible_models``), if that gain is above ``min_gain``. One move at a time can miss a
        better configuration that needs several moves whose single steps each measure worse; the
        measurements so far say which model errors are still possible, and this tries the most
        promising configuration under them."""
        if self.escapes >= self.settings.max_escapes or self.best is None:
            return None
        base = self.best[0]
        candidates = [c for c in self._within_moves(base, self.settings.escape_depth) if Masker.key(c) not in self.visited]
        if not candidates:
            return None
        gains = np.zeros(len(candidates))
        for model in self._plausible_models():
            base_x = max(simulate(model, base, self.node).rows_per_s, 1e-9)
            predicted = np.array([simulate(model, c, self.node).score for c in candidates])
            gains = np.maximum(gains, predicted / base_x)
        best_i = int(np.argmax(gains))
        if gains[best_i] <= 1.0 + self.settings.min_gain:
            return None
        self.escapes += 1
        return candidates[best_i]

    def _model_jump(self) -> Config | None:
        """Where the re-fitted model says to go: climb from the best measured configuration on the
        model, each round to the best configuration within two moves, and propose the end point if
        it is unmeasured and the model predicts it beats the start by more than ``min_gain``."""
        if not self.settings.refit or self.jumps >= self.settings.max_jumps:
            return None
        best = self.best
        if best is None:
            return None
        base = best[0]
        cache: dict[tuple, float] = {}

        def predict(config: Config) -> float:
            key = Masker.key(config)
            if key not in cache:
                cache[key] = simulate(self.belief, config, self.node).score
            return cache[key]

        def neighbourhood(config: Config) -> list[Config]:
            first = [c for i, c in enumerate(self.masker.targets(config)) if c is not None and i != STOP]
            first.sort(key=lambda c: -predict(c))
            out = list(first)
            for c in first[: self.settings.jump_width]:
                out += [c2 for i, c2 in enumerate(self.masker.targets(c)) if c2 is not None and i != STOP]
            return out

        start_x = predict(base)
        current, current_x = base, start_x
        for _ in range(12):
            candidates = neighbourhood(current)
            if not candidates:
                break
            nxt = max(candidates, key=predict)
            if predict(nxt) <= current_x * (1.0 + 1e-6):
                break
            current, current_x = nxt, predict(nxt)
        if Masker.key(current) in self.visited or current_x <= max(start_x, 1e-9) * (1.0 + self.settings.min_gain):
            return None
        return current

    def _rank(self, base: Config, obs: np.ndarray, mask: np.ndarray) -> list[int]:
        """Valid actions, best first: the agent's Q-value plus ``model_weight`` times the
        calibrated model's predicted log gain of the step (both are in log-throughput units)."""
        q = self.agent.q_values(obs) if self.settings.use_agent else np.zeros(len(ACTIONS), dtype=np.float32)
        valid = np.flatnonzero(mask)
        if self.settings.model_weight:
            base_x = max(simulate(self.belief, base, self.node).rows_per_s, 1e-9)
            for a in valid:
                if a == STOP:
                    continue
                target = apply_action(self.space, base, ACTIONS[a])
                assert target is not None
                q[a] += self.settings.model_weight * math.log(max(simulate(self.belief, target, self.node).rows_per_s, 1e-9) / base_x)
        return [int(a) for a in valid[np.argsort(-q[valid], kind="stable")]]

    # -- helpers ----------------------------------------------------------------------------
    def _obs(self, config: Mapping[str, int], m: Measurement | None, improved: bool) -> np.ndarray:
        assert m is not None
        best = max((v.rows_per_s for v in self.visited.values()), default=m.rows_per_s)
        return observe(self.space, self.node, self.belief, config, m, start_rows_per_s=self.start_x,
                       best_rows_per_s=max(best, 1e-9), progress=self.steps / self.settings.max_steps, improved=improved)

    def _learn_failure(self, config: Mapping[str, int], m: Measurement) -> None:
        """Learn from a measurement: a failed configuration is masked for good; a failure for
        memory masks every configuration at least as large in every knob and scales the memory
        model up (:meth:`Masker.learn_memory`); any other failure feeds the failure rules
        (:mod:`optimizers.intune.failures`). A run that measured more memory than modelled scales
        the memory model as well."""
        reason = m.extra.get("failure") if m.oom else None
        if m.oom:
            self.masker.forbidden.add(Masker.key(config))
        if m.peak_rss_mb > 0 and (not m.oom or is_memory_failure(reason)):
            self.masker.learn_memory(config, m.peak_rss_mb, failed=m.oom)
        if not is_memory_failure(reason):
            self.failures.add(config, failed=m.oom)

    def _next_start(self) -> Config | None:
        """Where to start: the model's best, its near-tied alternatives, then (when those failed)
        the model's best of what the masks still allow, then the space's initial configuration."""
        fresh = lambda c: Masker.key(c) not in self.visited and self.masker.safe(c)  # noqa: E731
        for c in (self.start, *self.start_queue):
            if fresh(c):
                return dict(c)
        best, _ = model_best(self.belief, self.space, self.node, self.masker)
        if fresh(best):
            return best
        if fresh(self.space.initial()):
            return self.space.initial()
        near = [c for c in self._within_moves(self.start, 2) if Masker.key(c) not in self.visited]
        return near[0] if near else None

    def _expected_s(self) -> float:
        """How long the next measurement may take, for the time budget's checks: the longest of
        the recent ones, leaving out the first (it pays the measuring process's start-up) and any
        that followed a failed one (a failure restarts the measuring process, and the next
        measurement pays its start-up again) unless the last measurement failed. The longest, not
        the typical: a measurement that starts must end within the budget."""
        failed = [h["oom"] for h in self.history]
        if failed and failed[-1]:
            recent = self.durations[1:]
        else:
            recent = [d for i, d in enumerate(self.durations) if i > 0 and not (i <= len(failed) and failed[i - 1])]
        recent = recent[-7:] or self.durations
        return float(max(recent))

    def _fits(self, measurements: int = 1) -> bool:
        """Whether ``measurements`` more fit in the part of the budget kept for them."""
        if self.time_budget_s is None or self.t0 is None or not self.durations:
            return True
        return self.clock() - self.t0 + measurements * self._expected_s() <= CONFIRM_SHARE * self.time_budget_s

    def _fit_rms(self) -> float:
        """RMS log error of the current belief over the live measurements (inf with none)."""
        points = self._live_points()
        if not points:
            return math.inf
        return math.sqrt(sum(math.log(max(simulate(self.belief, c, self.node).rows_per_s, 1e-9) / x) ** 2
                             for c, x in points) / len(points))

    def _explore_candidates(self) -> list[Config]:
        """Unmeasured configurations the masks allow: the whole grid when small, else those within
        ``escape_depth`` moves of the three best measured ones."""
        if self.space.grid_size() <= EXPLORE_GRID:
            pool = [c for c in self.space.grid() if self.masker.safe(c)]
        else:
            ranked = sorted((kv for kv in self.visited.items() if not kv[1].oom), key=lambda kv: -kv[1].rows_per_s)
            pool = [c for k, _ in ranked[:3] for c in self._within_moves(dict(k), self.settings.escape_depth)]
        seen: set[tuple] = set()
        out = []
        for c in pool:
            key = Masker.key(c)
            if key not in self.visited and key not in seen:
                seen.add(key)
                out.append(c)
        return out

    def _explore(self) -> Config | None:
        """When the search stalls and no escape is left: unless InTune is sure, the unmeasured
        configuration with the largest optimistic gain over the best measured one (the largest
        under any plausible model, after the failure penalty). Sure means: the re-fitted model
        fits the live measurements within ``sure_error`` RMS log error and no candidate may gain
        ``min_gain``. While it is not sure it keeps measuring, until its budget ends the search."""
        best = self.best
        candidates = self._explore_candidates()
        if best is None or not candidates:
            return None
        models = self._plausible_models()
        prior = np.array([simulate(self.belief, c, self.node).score for c in candidates])
        order = np.argsort(-prior)[:EXPLORE_SHORTLIST]
        shortlist = [candidates[i] for i in order]
        gains = np.zeros(len(shortlist))
        for model in models:
            base_x = max(simulate(model, best[0], self.node).rows_per_s, 1e-9)
            gains = np.maximum(gains, np.array([simulate(model, c, self.node).score for c in shortlist]) / base_x)
        penalty = np.array([self.settings.failure_penalty if self.failures.predicted(c) else 1.0 for c in shortlist])
        gains = gains * penalty
        top = int(np.argmax(gains))
        if gains[top] <= 1.0 + self.settings.min_gain and self._fit_rms() <= self.settings.sure_error:
            return None
        self.explorations += 1
        return shortlist[top]

    def _stop_reason(self, now: float) -> str | None:
        """Why the search stops now, if it does: the time budget first (a stall must not take the
        time kept for the confirmation), then the step limit, then a stall (``patience``)."""
        if self.time_budget_s is not None and self.t0 is not None and self.durations:
            expected = self._expected_s()
            if now - self.t0 + expected > self.settings.finish_share * self.time_budget_s:
                return "time budget"
            # leave room for the confirmation and the settle after the next step, once there is
            # something to confirm (with fewer than three configurations measured, search on)
            reserve = self._confirm_reserve()
            if reserve and now - self.t0 + expected * (1 + reserve) > CONFIRM_SHARE * self.time_budget_s:
                return "time budget (kept for the confirmation)"
        if self.steps >= self.settings.max_steps:
            return "step limit"
        if self.no_improve >= self.settings.patience:
            return f"no improvement in {self.settings.patience} live steps"
        return None

    def _confirm_reserve(self) -> int:
        """Measurements to keep for the end: the confirmation of what would be confirmed now
        (``_confirm_candidates``) and, if that is two or more, a settle pair. None while fewer than
        three configurations ran (search on). Kept to what is needed, so a short budget is not
        spent waiting on a confirmation of near-ties that do not exist."""
        best = self.best
        if best is None or sum(1 for m in self.visited.values() if not m.oom) < 3:
            return 0
        confirm = len(self._confirm_candidates(best[1].rows_per_s))
        return confirm + (SETTLE_MEASUREMENTS if self.settings.settle_band and confirm >= 2 else 0)

    def _escape_or_finish(self, reason: str) -> Config | None:
        """On a stall, propose an escape (``_escape``) if there is one; otherwise confirm and finish."""
        if reason.startswith(STALLED):
            escape = self._escape() or self._explore()
            if escape is not None:
                self.pending = None
                return escape
        return self._confirm_or_finish(reason)

    def _confirm_or_finish(self, reason: str) -> Config | None:
        """Before finishing, measure once more the ``confirm_top`` best configurations that
        measured within ``confirm_band`` of the best (as many as fit in the time budget), so the
        recommendation is the best by the mean of its measurements, not one lucky measurement."""
        self.pending = None
        best = self.best
        if self.confirm_queue is not None or best is None:
            return self._finish(reason)
        queue = self._confirm_candidates(best[1].rows_per_s)
        if self.time_budget_s is not None and self.t0 is not None and self.durations:
            left = CONFIRM_SHARE * self.time_budget_s - (self.clock() - self.t0)
            queue = queue[: max(0, int(left // self._expected_s()))]
        if not queue:
            return self._finish(reason)
        self.confirm_queue, self.confirm_reason = queue[1:], reason
        self.confirm_order = [Masker.key(c) for c in queue]
        return queue[0]

    def _split(self, config: Mapping[str, int]) -> tuple:
        return cpu_split(self.space, config)

    def _confirm_candidates(self, best_x: float) -> list[Config]:
        """What the confirmation measures again, best first: the ``confirm_top`` best configurations
        that measured within ``confirm_band`` of ``best_x``; if those share one CPU split, also the
        best configuration of another split that measured within ``confirm_split_band``. Which
        split wins is the decision that moves throughput most; a split that measured 10-25% lower
        in one search measurement may still be the better one (a measurement moves about 10%)."""
        ranked = sorted((kv for kv in self.visited.items() if not kv[1].oom), key=lambda kv: -kv[1].rows_per_s)
        floor = best_x * (1.0 - self.settings.confirm_band)
        keys = [k for k, m in ranked[: self.settings.confirm_top] if m.rows_per_s >= floor]
        band = self.settings.confirm_split_band
        splits = {self._split(dict(k)) for k in keys}
        if band and len(splits) == 1:
            other = next((k for k, m in ranked if self._split(dict(k)) not in splits), None)
            if other is not None and self.visited[other].rows_per_s >= best_x * (1.0 - band):
                keys.append(other)
        return [dict(k) for k in keys]

    def _paired_ranking(self) -> list[tuple[tuple, float]]:
        """Configurations with confirmation (or settle) measurements, best first by the mean of
        those measurements only (not out of memory)."""
        ranked = [(k, float(np.mean(v))) for k, v in self.paired.items() if v and not self.visited[k].oom]
        return sorted(ranked, key=lambda kv: -kv[1])

    def _settle_queue(self) -> list[Config]:
        """If the two best confirmed configurations are within ``settle_band`` of each other by
        their paired measurements: each once more, if both measurements fit in the budget;
        otherwise nothing. The first round goes in the reverse of the confirmation's order, and
        each later round reverses the one before (so drift favours neither)."""
        ranked = self._paired_ranking()
        if not self.settings.settle_band or len(ranked) < 2 or ranked[1][1] < ranked[0][1] * (1.0 - self.settings.settle_band):
            return []
        if self.time_budget_s is not None and self.t0 is not None and self.durations:
            left = CONFIRM_SHARE * self.time_budget_s - (self.clock() - self.t0)
            if left < SETTLE_MEASUREMENTS * self._expected_s():
                return []
        pair = [ranked[0][0], ranked[1][0]]
        order = {k: i for i, k in enumerate(self.confirm_order)}
        pair.sort(key=lambda k: -order.get(k, 0))  # reverse of the confirmation's order
        if self.settle_rounds % 2 == 1:
            pair.reverse()
        return [dict(k) for k in pair]

    def _finish(self, reason: str) -> None:
        self.finished = reason
        if self.on_finish is not None:
            self.on_finish(self)
        return None

    @property
    def best(self) -> tuple[Config, Measurement] | None:
        """The recommendation: once two or more configurations have confirmation measurements,
        the best by the mean of those (paired in time); before that, the best by the mean of all
        of a configuration's measurements. Never a configuration that failed, and never one whose
        mean is more than ``confirm_band`` below the best mean measured: then that best is it."""
        ran = {k: m for k, m in self.visited.items() if not m.oom}
        if not ran:
            return None
        top_key = max(ran, key=lambda k: ran[k].rows_per_s)
        ranked = self._paired_ranking()
        key = ranked[0][0] if len(ranked) >= 2 else top_key
        if ran[key].rows_per_s < ran[top_key].rows_per_s * (1.0 - self.settings.confirm_band):
            key = top_key
        return dict(key), ran[key]

    def report(self) -> dict[str, Any]:
        best = self.best
        return {
            "optimizer": self.name,
            "start": self.start,
            "start_source": self.start_source,
            "start_alternatives": self.start_alternatives,
            "live_steps": self.steps,
            "model_jumps": self.jumps,
            "escapes": self.escapes,
            "explorations": self.explorations,
            "failed": [h for h in self.history if h["oom"]],
            "failure_rules": self.failures.report(),
            "confirmed": [{"config": dict(k), "rows_per_s_samples": v, "paired_samples": self.paired.get(k, [])}
                          for k, v in self.samples.items() if len(v) > 1],
            "settled": bool(self.settle_rounds and any(len(v) > 1 for v in self.paired.values())),
            "settle_rounds": self.settle_rounds,
            "refit_factors": self.refit_factors,
            "stopped_by": self.finished,
            "best_config": None if best is None else best[0],
            "best_rows_per_s": None if best is None else best[1].rows_per_s,
            "agent": self.agent.info,
        }
