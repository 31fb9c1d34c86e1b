"""What one InTune search works with: its fixed set-up and the state its phases update."""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Callable, TypedDict

import numpy as np

from ingestion.knobs import KnobSpace
from ingestion.measurement import Config, Measurement
from ingestion.node import Node
from ingestion.simulator import PipelineModel
from optimizers.intune.agent import AgentInfo, MaskedDQN
from optimizers.intune.env import Masker
from optimizers.intune.failures import FailureRules
from optimizers.intune.settings import InTuneSettings

#: A move proposed by the agent, kept until its measurement arrives: the observation, the
#: action, the base configuration's measurement and the base configuration.
PendingMove = tuple[np.ndarray, int, Measurement, Config]


@dataclass(frozen=True)
class SearchSetup:
    """What does not change during a search: the space, the node, the model before any refit
    (``prior``), the settings, the agent, and the time budget read from ``clock`` (None: no
    time budget, the search stops by its steps and stalls)."""

    space: KnobSpace
    node: Node
    prior: PipelineModel
    settings: InTuneSettings
    agent: MaskedDQN
    time_budget_s: float | None = None
    clock: Callable[[], float] = time.monotonic


class _TrialRecordRequired(TypedDict):
    """The keys every trial record has."""

    config: dict[str, int]
    rows_per_s: float
    oom: bool


class TrialRecord(_TrialRecordRequired, total=False):
    """One measurement the search took, in order: a new configuration or a repeat of one."""

    failure: str  # why a failed measurement failed
    repeat: bool  # a repeat of a configuration already measured


class RaceExit(TypedDict):
    """A configuration the confirmation race eliminated: after which round, by how much the
    leader beat it (the paired ratio and its interval) and by which rule."""

    config: dict[str, int]
    after_round: int
    leader_over_it: float
    low: float
    high: float
    by: str


class RaceEntrant(TypedDict):
    """A configuration still in the race at its end, with its rows/s in each round."""

    config: dict[str, int]
    rounds_rows_per_s: list[float]


class RaceReport(TypedDict):
    """What the confirmation race did (``confirm.race_report``): its rounds, who raced, who left
    and why, how the pick was decided, and the buffer knobs memory held down for the pick."""

    rounds: int
    entrants: int
    left: list[RaceEntrant]
    eliminated: list[RaceExit]
    decided_by: str
    buffers_memory_bound: dict[str, int]


class ConfirmedConfig(TypedDict):
    """A configuration measured more than once, with its samples and those of the race's rounds."""

    config: dict[str, int]
    rows_per_s_samples: list[float]
    paired_samples: list[float]


class InTuneReport(TypedDict):
    """What an InTune search did (``InTuneOptimizer.report``): where it started, how it moved,
    what failed and why, what it confirmed and raced, why it stopped and what it picked."""

    optimizer: str
    start: Config
    start_source: str
    start_alternatives: list[Config]
    live_steps: int
    model_jumps: int
    escapes: int
    explorations: int
    failed: list[TrialRecord]
    failure_rules: list[str]
    confirmed: list[ConfirmedConfig]
    race: RaceReport
    refit_factors: list[float]
    stopped_by: str | None
    best_config: Config | None
    best_rows_per_s: float | None
    agent: AgentInfo


@dataclass
class SearchState:
    """What the search has measured and decided so far; the phases read and update it.

    ``belief`` is the model re-fitted to the live measurements; ``visited`` the estimate of
    every measured configuration (the mean of its measurements), ``samples`` all its
    measurements and ``paired`` those of the final race's rounds (taken back to back, one per
    round); ``race_order`` is the order of the last round, ``race_rounds`` the rounds done,
    ``race_entrants`` how many configurations the first round measured and ``race_out`` those
    that left the race (:mod:`optimizers.intune.phases.confirm`).
    """

    belief: PipelineModel
    masker: Masker
    failures: FailureRules
    start: Config
    start_source: str
    start_alternatives: list[Config]
    start_queue: list[Config]
    visited: dict[tuple, Measurement] = field(default_factory=dict)
    samples: dict[tuple, list[float]] = field(default_factory=dict)
    paired: dict[tuple, list[float]] = field(default_factory=dict)
    expanded: dict[tuple, int] = field(default_factory=dict)
    history: list[TrialRecord] = field(default_factory=list)
    durations: list[float] = field(default_factory=list)
    refit_factors: list[float] = field(default_factory=list)
    current: Config | None = None
    current_m: Measurement | None = None
    start_x: float = 1e-9
    pending: PendingMove | None = None
    no_improve: int = 0
    steps: int = 0
    jumps: int = 0
    escapes: int = 0
    explorations: int = 0
    confirm_queue: list[Config] | None = None
    confirm_reason: str = ""
    race_order: list[tuple] = field(default_factory=list)
    race_rounds: int = 0
    race_entrants: int = 0
    race_out: list[RaceExit] = field(default_factory=list)
    t0: float | None = None
    last_ask: float | None = None
    finished: str | None = None

    def ranked(self) -> list[tuple[tuple, Measurement]]:
        """The measured configurations that ran, best first by their estimate."""
        return sorted((kv for kv in self.visited.items() if not kv[1].failed), key=lambda kv: -kv[1].rows_per_s)

    def set_belief(self, model: PipelineModel, factors: list[float]) -> None:
        """A re-fitted model: the belief, the masker's memory model and the fitted factors."""
        self.belief = model
        self.masker.belief = model
        self.refit_factors = factors
