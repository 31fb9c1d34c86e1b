"""The rollout function's event and reply, by their keys (``serverless.handler`` describes them).

They are JSON by contract (a Lambda payload, a Ray task's argument, a line to a local worker),
so they stay dicts on the wire; these TypedDicts name every key and its type, so the trainer,
the collector and every backend say what they pass instead of passing an untyped dict.
(No postponed annotations here: a TypedDict's ``NotRequired`` keys are only known to Python
when the annotations are evaluated, and ``tests/serverless/test_rollout_event.py`` reads them.)
"""

from typing import Literal, NotRequired, TypedDict

from core.json_edge import JsonObject


class S3Ref(TypedDict):
    """An object in S3 that carries an npz too large to ride inline."""

    bucket: str
    key: str


class EpisodeStart(TypedDict, total=False):
    """How an episode began: a seeded reset (``seed``), or an unseeded one from the env's
    bit-generator state (``rng``, numpy's own JSON-able state, passed through as is)."""

    seed: int
    rng: JsonObject


class EpisodeSnapshot(TypedDict):
    """A slot's episode in progress: its start, the steps since, and the actions and the
    observation reached (npz, base64) to replay it elsewhere."""

    start: EpisodeStart
    steps: int
    replay_npz_b64: str


class SlotEpisode(EpisodeSnapshot):
    """A reply's episode in progress, with the slot it belongs to."""

    slot: int


class SlotEntry(TypedDict):
    """One env slot of an event: its steps, its seed and, when known, its episode in progress."""

    slot: int
    num_steps: int
    seed: int
    episode: NotRequired[EpisodeSnapshot]


class PolicySpecJson(TypedDict):
    """A policy's shape as JSON (``PolicySpec.to_dict``, read back by ``PolicySpec.from_dict``):
    what an actor rebuilds the policy from, the network's keys inline."""

    obs_dim: int
    action_kind: Literal["discrete", "continuous"]
    act_dim: int
    hidden: list[int]
    activation: NotRequired[str]  # absent in an older checkpoint's spec: tanh
    action_low: list[float] | None
    action_high: list[float] | None


class RolloutEvent(TypedDict):
    """What one rollout function is asked to run."""

    env_id: str
    num_steps: int
    seed: int
    policy_spec: PolicySpecJson
    actor_id: int
    weights_npz_b64: NotRequired[str]
    weights_s3: NotRequired[S3Ref]
    env_kwargs: NotRequired[JsonObject]  # the user's gymnasium.make kwargs, passed through
    slots: NotRequired[list[SlotEntry]]
    rollout_id: NotRequired[list[int]]  # [iteration, slot, attempt], echoed in the reply
    run_id: NotRequired[str]  # the learner's run (Lambda): its own S3 folder for offloaded replies


class HandlerTimings(TypedDict):
    """The handler's own clocks (milliseconds)."""

    init_ms: float
    rollout_ms: float
    env_ms: float
    total_ms: float
    cpu_ms: float
    queued_ms: float  # time on the host's run queue, runnable but not running (0 where not readable)


class EmulatorFigures(TypedDict):
    """What the local emulator measured of one invocation (its worker's clocks)."""

    measured_wall_ms: float
    measured_cpu_ms: float
    host_speed: float
    throttled_s: float


class RolloutReply(TypedDict):
    """What one rollout function answers: its trajectories (npz, inline or in S3) and figures."""

    trajectories_npz_b64: NotRequired[str]
    trajectories_s3: NotRequired[S3Ref]
    episode_returns: list[float]
    episode_lengths: list[int]
    episode_slots: NotRequired[list[int]]
    slot_episodes: NotRequired[list[SlotEpisode]]
    replayed_slots: NotRequired[int]
    replay_mismatch: NotRequired[list[int]]
    env_steps: int
    actor_id: int
    rollout_id: NotRequired[list[int]]
    cold_start: bool
    timings: HandlerTimings
    lane: NotRequired[int]  # the local worker or Ray actor that ran it (their events run in turn)
    emulator: NotRequired[EmulatorFigures]  # the local emulator's own measurements
