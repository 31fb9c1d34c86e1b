"""Where a training run stands: everything a checkpoint carries besides the learner."""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass, field
from typing import NotRequired, TypedDict

import numpy as np

from serverless.ledger import CostLedger, LedgerTotals
from serverless.rollouts import FaultTally, FaultTallyJson
from serverless.run_shape import RunShape
from serverless.rollout_event import EpisodeSnapshot, RolloutReply


class CurvePoint(TypedDict):
    """One point of the learning curve, after an iteration (cumulative figures)."""

    iteration: int
    env_steps: int
    wall_s: float
    lambda_time_s: float
    mean_return: float | None
    episodes: int
    cost_usd: float


# A configuration change: the iteration it came after and the run shapes (RunShape.to_dict())
# either side; "from" is a keyword, hence the functional form.
ConfigChange = TypedDict("ConfigChange", {"iteration": int, "env_steps": int, "from": dict[str, int], "to": dict[str, int]})


class RolloutCounts(TypedDict):
    used: int
    lost: int
    duplicate: int


class RunStateJson(TypedDict):
    """A :class:`RunState` as a checkpoint holds it (keys an older checkpoint may lack: NotRequired)."""

    env_id: str
    iteration: int
    env_steps: int
    lambda_time_s: float
    controller_s: NotRequired[float]
    wall_s: float
    recent_returns: list[float]
    episodes: int
    curve: list[CurvePoint]
    config_changes: list[ConfigChange]
    run: dict[str, int]  # RunShape.to_dict()
    ledger: LedgerTotals
    slot_episodes: NotRequired[dict[str, EpisodeSnapshot]]  # by slot number (a JSON key: a string)
    rollouts: NotRequired[RolloutCounts]
    faults: NotRequired[FaultTallyJson]
    hedge_history: NotRequired[list[float]]


@dataclass
class RunState:
    """The run's counters, clocks, recent returns, curve and rollout bookkeeping."""

    run: RunShape
    reach_window: int
    iteration: int = 0
    env_steps: int = 0
    lambda_time_s: float = 0.0
    controller_s: float = 0.0  # part of lambda_time_s: the controller's work between iterations
    wall_s_before: float = 0.0  # measured wall time of the run before this process resumed it
    recent_returns: deque[float] = field(default_factory=deque)
    episodes: int = 0
    curve: list[CurvePoint] = field(default_factory=list)
    config_changes: list[ConfigChange] = field(default_factory=list)
    # env slots: each slot's episode in progress, as its last result gave it (sent back
    # with the slot so that any instance continues it; serverless.handler)
    slot_episodes: dict[int, EpisodeSnapshot] = field(default_factory=dict)
    # rollout bookkeeping over the iterations trained on (serverless.rollouts)
    rollouts_used: int = 0
    lost_rollouts: int = 0
    duplicate_rollouts: int = 0
    faults: FaultTally = field(default_factory=FaultTally)
    hedge_history: list[float] = field(default_factory=list)

    def __post_init__(self) -> None:
        self.recent_returns = deque(self.recent_returns, maxlen=self.reach_window)

    def keep_slot_episodes(self, results: list[RolloutReply]) -> list[int]:
        """Remember each slot's episode in progress; return the slots whose replay failed."""
        mismatched: list[int] = []
        for res in results:
            for episode in res.get("slot_episodes", []):
                self.slot_episodes[int(episode["slot"])] = {k: v for k, v in episode.items() if k != "slot"}
            mismatched += [int(k) for k in res.get("replay_mismatch", [])]
        return mismatched

    def add_episodes(self, results: list[RolloutReply]) -> None:
        """Actor order; with env slots, slot order (episodes of one slot in their order)."""
        finished: list[tuple[int | None, float]] = []
        for res in results:
            slots = res.get("episode_slots") or [None] * len(res["episode_returns"])
            finished += [(slot, float(ret)) for slot, ret in zip(slots, res["episode_returns"])]
        if finished and all(slot is not None for slot, _ in finished):
            finished.sort(key=lambda item: item[0])  # stable: a slot's own episodes keep their order
        for _, ret in finished:
            self.recent_returns.append(ret)
            self.episodes += 1

    def count_rollouts(self, planned_slots: int, used_ids: list[tuple[int, int, int]]) -> None:
        """Check an iteration's rollouts: every planned slot used exactly once."""
        slots = [slot for _, slot, _ in used_ids]
        self.rollouts_used += len(slots)
        self.duplicate_rollouts += len(slots) - len(set(slots))
        self.lost_rollouts += len(set(range(planned_slots)) - set(slots))

    def mean_recent(self) -> float | None:
        return float(np.mean(self.recent_returns)) if self.recent_returns else None

    def reached(self, target: float) -> bool:
        """Mean of the last ``reach_window`` completed training episodes >= target."""
        return len(self.recent_returns) >= self.reach_window and float(np.mean(self.recent_returns)) >= target

    def to_json(self, env_id: str, wall_s: float, ledger: CostLedger) -> RunStateJson:
        return {
            "env_id": env_id,
            "iteration": self.iteration,
            "env_steps": self.env_steps,
            "lambda_time_s": self.lambda_time_s,
            "controller_s": self.controller_s,
            "wall_s": wall_s,
            "recent_returns": list(self.recent_returns),
            "episodes": self.episodes,
            "curve": self.curve,
            "config_changes": self.config_changes,
            "run": self.run.to_dict(),
            "ledger": ledger.totals(),
            "slot_episodes": {str(k): v for k, v in self.slot_episodes.items()},
            "rollouts": {"used": self.rollouts_used, "lost": self.lost_rollouts, "duplicate": self.duplicate_rollouts},
            "faults": self.faults.to_dict(),
            "hedge_history": list(self.hedge_history),
        }

    @classmethod
    def from_json(cls, state: RunStateJson, reach_window: int) -> "RunState":
        rollouts = state.get("rollouts", {})
        return cls(
            run=RunShape.from_dict(state["run"]),
            reach_window=reach_window,
            iteration=int(state["iteration"]),
            env_steps=int(state["env_steps"]),
            lambda_time_s=float(state["lambda_time_s"]),
            controller_s=float(state.get("controller_s", 0.0)),
            wall_s_before=float(state["wall_s"]),
            recent_returns=deque(state["recent_returns"]),
            episodes=int(state["episodes"]),
            curve=list(state["curve"]),
            config_changes=list(state["config_changes"]),
            slot_episodes={int(k): v for k, v in state.get("slot_episodes", {}).items()},
            rollouts_used=int(rollouts.get("used", 0)),
            lost_rollouts=int(rollouts.get("lost", 0)),
            duplicate_rollouts=int(rollouts.get("duplicate", 0)),
            faults=FaultTally.from_dict(state.get("faults", {})),
            hedge_history=[float(x) for x in state.get("hedge_history", [])],
        )
