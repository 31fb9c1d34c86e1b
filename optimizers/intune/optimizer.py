"""InTune as an ask/tell optimizer: a model-best start, then agent-ranked steps on live measurements.

Each phase is a module of :mod:`optimizers.intune.phases`; this class only sequences them over
one :class:`~optimizers.intune.state.SearchState`. Every number they use is an
:class:`~optimizers.intune.settings.InTuneSettings` field. In order, an ``ask`` proposes:

1. the start (:mod:`.phases.start`): the model's best memory-safe configuration, then the model's
   best of each other CPU split it predicts within ``start_band`` of its best (near-ties the model
   cannot rank are settled by measurement before the local search);
2. while the final race runs, its next measurement (:mod:`.phases.confirm`);
3. if the search must stop (:mod:`.phases.budget`: time, ``max_steps``, ``patience``): on a stall
   an escape or an exploration (:mod:`.phases.escape`), else the confirmation, else nothing;
4. a model jump, when the re-fitted model predicts a gain (:mod:`.phases.jump`);
5. else one best-first step ranked by the agent plus the model (:mod:`.phases.step`).

A ``tell`` records the measurement, learns from a failure (masks and failure rules), fine-tunes
the agent on the step's residual reward and re-fits the model (:mod:`.phases.model_fit`).
"""

from __future__ import annotations

import time
from dataclasses import replace
from typing import Callable, Mapping

import numpy as np

from ingestion.knobs import KnobSpace
from ingestion.measurement import Config, Measurement
from ingestion.node import Node
from ingestion.simulator import PipelineModel
from optimizers.intune.agent import MaskedDQN
from optimizers.intune.env import Masker
from optimizers.intune.failures import FailureRules, is_memory_failure
from optimizers.intune.phases import budget, confirm
from optimizers.intune.phases.escape import escape, explore
from optimizers.intune.phases.jump import model_jump
from optimizers.intune.phases.model_fit import FLOOR, refit
from optimizers.intune.phases.start import choose_start, next_start
from optimizers.intune.phases.step import best_first_step, finetune
from optimizers.intune.settings import InTuneSettings
from optimizers.intune.state import InTuneReport, SearchSetup, SearchState


def _initial_state(setup: SearchSetup, start: Config | None, start_source: str) -> SearchState:
    """The state before the first measurement: masks, failure rules and where to start."""
    s = setup.settings
    failures = FailureRules(setup.space)
    masker = Masker(setup.space, setup.node, setup.prior, s.memory_margin)
    masker.predicts_failure = lambda c: failures.predicted(c) >= 2
    alternatives: list[Config] = []
    if start is None:
        start, start_source, alternatives = choose_start(setup.prior, setup.space, setup.node, masker, s)
    return SearchState(belief=setup.prior, masker=masker, failures=failures, start=dict(start),
                       start_source=start_source, start_alternatives=[dict(c) for c in alternatives],
                       start_queue=[dict(c) for c in alternatives])


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
        self.setup = SearchSetup(space, node, belief, settings, agent, time_budget_s, clock)
        self.state = _initial_state(self.setup, start, start_source)
        self.on_finish = on_finish

    # -- what the callers read ------------------------------------------------------------------
    space = property(lambda self: self.setup.space)
    node = property(lambda self: self.setup.node)
    prior = property(lambda self: self.setup.prior)
    settings = property(lambda self: self.setup.settings)
    agent = property(lambda self: self.setup.agent)
    start = property(lambda self: self.state.start)
    steps = property(lambda self: self.state.steps)
    finished = property(lambda self: self.state.finished)
    history = property(lambda self: self.state.history)

    @property
    def best(self) -> tuple[Config, Measurement] | None:
        """The recommendation (:func:`optimizers.intune.phases.confirm.recommendation`)."""
        return confirm.recommendation(self.setup, self.state)

    # -- ask/tell ---------------------------------------------------------------------------
    def ask(self) -> Config | None:
        state = self.state
        now = self.setup.clock()
        if state.t0 is None:
            state.t0 = now
        if state.finished:
            return None
        state.last_ask = now
        if state.current is None:
            first = next_start(self.setup, state)
            return first if first is not None else self._finish("every start candidate failed")
        state.start_queue = [c for c in state.start_queue if Masker.key(c) not in state.visited and state.masker.safe(c)]
        if state.start_queue:
            return state.start_queue.pop(0)
        if state.confirm_queue is not None:
            return self._confirming()
        best = self.best
        reason = budget.stop_reason(self.setup, state, now, None if best is None else best[1].rows_per_s)
        if reason:
            return self._escape_or_finish(reason)
        jump = model_jump(self.setup, state, None if best is None else best[0])
        if jump is not None:
            state.pending = None
            state.jumps += 1
            return jump
        step = best_first_step(self.setup, state)
        return self._escape_or_finish(step) if isinstance(step, str) else step

    def tell(self, config: Config, measurement: Measurement) -> None:
        state = self.state
        now = self.setup.clock()
        if state.last_ask is not None:
            state.durations.append(now - state.last_ask)
        key = Masker.key(config)
        if key in state.visited:
            self._tell_repeat(config, measurement)
            return
        state.samples[key] = [measurement.rows_per_s]
        state.visited[key] = measurement
        self._learn_failure(config, measurement)
        state.history.append({"config": dict(config), "rows_per_s": measurement.rows_per_s, "oom": measurement.failed,
                              **({"failure": str(measurement.extra.get("failure"))} if measurement.failed else {})})
        if state.confirm_queue is not None:  # a new entrant of the race (a buffer variant): a round's measurement
            state.steps += 1
            if not measurement.failed:
                state.paired.setdefault(key, []).append(measurement.rows_per_s)
            refit(self.setup, state)
            return
        if state.current is None:
            if measurement.failed:  # the start failed: the next start candidate is tried (``next_start``)
                return
            state.current, state.current_m = dict(config), measurement
            state.start_x = max(measurement.rows_per_s, FLOOR)
            refit(self.setup, state)  # the level, from this first measurement
            return
        self._tell_step(config, measurement)

    def _tell_step(self, config: Config, measurement: Measurement) -> None:
        """A search step's measurement: fine-tune the agent, re-fit the model, move the current
        configuration on a gain of ``min_gain``, else count a step without improvement (the
        start's own near-ties count as none)."""
        state = self.state
        state.steps += 1
        x = max(measurement.rows_per_s, FLOOR)
        if state.pending is not None:
            finetune(self.setup, state, config, measurement)
        refit(self.setup, state)
        assert state.current_m is not None
        if not measurement.failed and x > max(state.current_m.rows_per_s, FLOOR) * (1.0 + self.settings.min_gain):
            state.current, state.current_m = dict(config), measurement
            state.no_improve = 0
        elif all(Masker.key(c) != Masker.key(config) for c in state.start_alternatives):
            state.no_improve += 1

    def _tell_repeat(self, config: Config, measurement: Measurement) -> None:
        """A configuration measured again (the race): its estimate becomes the mean of its
        measurements; the search state (current, patience) is left alone."""
        state = self.state
        key = Masker.key(config)
        state.steps += 1
        state.history.append({"config": dict(config), "rows_per_s": measurement.rows_per_s, "oom": measurement.failed,
                              "repeat": True})
        if measurement.failed:  # failed this time: never recommend it
            state.visited[key] = measurement
            state.masker.forbidden.add(key)
            return
        state.samples[key].append(measurement.rows_per_s)
        if state.confirm_queue is not None:
            state.paired.setdefault(key, []).append(measurement.rows_per_s)
        mean = float(np.mean(state.samples[key]))
        state.visited[key] = replace(measurement, rows_per_s=mean,
                                     extra={**dict(measurement.extra), "samples": list(state.samples[key])})
        refit(self.setup, state)

    def _learn_failure(self, config: Mapping[str, int], m: Measurement) -> None:
        """A failed configuration is masked for good; a failure for memory masks every
        configuration at least as large in every knob and scales the memory model up
        (:meth:`Masker.learn_memory`); any other failure feeds the failure rules
        (:mod:`optimizers.intune.failures`). A run that measured more memory than modelled scales
        the memory model as well."""
        state = self.state
        reason = m.extra.get("failure") if m.failed else None
        if m.failed:
            state.masker.forbidden.add(Masker.key(config))
        if m.peak_rss_mb > 0 and (not m.failed or is_memory_failure(reason)):
            state.masker.learn_memory(config, m.peak_rss_mb, failed=m.failed)
        if not is_memory_failure(reason):
            state.failures.add(config, failed=m.failed)

    # -- the end ------------------------------------------------------------------------------
    def _confirming(self) -> Config | None:
        """The race's current round while it fits; once it is over (or cut short by the budget),
        the next round (:func:`~optimizers.intune.phases.confirm.next_round`), else the end."""
        state = self.state
        assert state.confirm_queue is not None
        if state.confirm_queue and budget.fits(self.setup, state):
            return state.confirm_queue.pop(0)
        state.race_rounds += 1
        state.confirm_queue = confirm.next_round(self.setup, state, lambda n: budget.room_for(self.setup, state, n))
        return state.confirm_queue.pop(0) if state.confirm_queue else self._finish(state.confirm_reason)

    def _escape_or_finish(self, reason: str) -> Config | None:
        """On a stall, an escape or an exploration if there is one; otherwise confirm and finish."""
        if reason.startswith(budget.STALLED):
            best = self.best
            target = escape(self.setup, self.state, None if best is None else best[0])
            if target is None:
                target = explore(self.setup, self.state, None if best is None else best[0])
            if target is not None:
                self.state.pending = None
                return target
        return self.confirm_or_finish(reason)

    def confirm_or_finish(self, reason: str) -> Config | None:
        """Before finishing, race the finalists
        (:func:`~optimizers.intune.phases.confirm.confirm_candidates`, as many as fit in the time
        budget) side by side, so the recommendation is decided by paired measurements."""
        state = self.state
        state.pending = None
        best = self.best
        if state.confirm_queue is not None or best is None:
            return self._finish(reason)
        queue = confirm.confirm_candidates(self.setup, state, best[1].rows_per_s)
        room = budget.measurements_that_fit(self.setup, state)
        if room is not None:
            queue = queue[:room]
        if not queue:
            return self._finish(reason)
        return confirm.start_confirmation(state, queue, reason)

    def _finish(self, reason: str) -> None:
        self.state.finished = reason
        if self.on_finish is not None:
            self.on_finish(self)
        return None

    def report(self) -> InTuneReport:
        state, best = self.state, self.best
        return {
            "optimizer": self.name,
            "start": state.start,
            "start_source": state.start_source,
            "start_alternatives": state.start_alternatives,
            "live_steps": state.steps,
            "model_jumps": state.jumps,
            "escapes": state.escapes,
            "explorations": state.explorations,
            "failed": [h for h in state.history if h["oom"]],
            "failure_rules": state.failures.report(),
            "confirmed": [{"config": dict(k), "rows_per_s_samples": v, "paired_samples": state.paired.get(k, [])}
                          for k, v in state.samples.items() if len(v) > 1],
            "race": confirm.race_report(self.setup, state),
            "refit_factors": state.refit_factors,
            "stopped_by": state.finished,
            "best_config": None if best is None else best[0],
            "best_rows_per_s": None if best is None else best[1].rows_per_s,
            "agent": self.agent.info,
        }
