"""The rollout function: ``handler(event, context)``, the same code locally, in Ray and in Lambda.

It needs only numpy and gymnasium (plus boto3, lazily, when the weights come from S3).

Event::

    {"env_id": "CartPole-v1", "num_steps": 256, "seed": 123, "actor_id": 0,
     "policy_spec": {...PolicySpec.to_dict()...},
     "weights_npz_b64": "<base64 npz>"          # or
     "weights_s3": {"bucket": "...", "key": "..."}}

An optional ``"env_kwargs": {...}`` (a JSON object) is passed to
``gymnasium.make(env_id, **env_kwargs)``. An ``env_id`` in gymnasium's ``module:EnvId``
form makes ``gymnasium.make`` import ``module`` (which registers ``EnvId``) in this
process, so the module must be importable here: on the worker's path, in the Ray
``runtime_env``, or in the Lambda zip.

Result::

    {"trajectories_npz_b64": "<base64 npz>", "episode_returns": [...],
     "episode_lengths": [...], "env_steps": 256, "actor_id": 0, "cold_start": false,
     "timings": {"init_ms", "rollout_ms", "env_ms", "total_ms", "cpu_ms", "queued_ms"}}

``env_ms`` is the part of ``rollout_ms`` spent inside the env (``step`` and ``reset``);
the rest of ``rollout_ms`` is the policy's inference and the rollout's bookkeeping.

An event's optional ``rollout_id`` (the trainer's [iteration, slot, attempt]) is echoed
in the result, so the trainer can refuse a result that answers another attempt.

Env slots (optional). An event with ``"slots": [{"slot": k, "num_steps": n, "seed": s},
...]`` steps one env per slot, each for its own ``n`` steps with its own seed, in the
order given; ``num_steps`` is then their sum. The trainer uses slots so that what is
learned does not depend on how many functions share the work (``PPOConfig.steps_per_env``).
The result's arrays are the slots' segments one after another, with
``segment_lengths`` and ``segment_slots`` [S] (int64) and ``last_value`` [S], and
``episode_slots`` names the slot of each finished episode.

Episode replay (env slots). Each slot's result also carries its episode in progress,
``slot_episodes``: ``[{"slot": k, "start": ..., "steps": n, "replay_npz_b64": ...}]``
where ``start`` says how the episode began (``{"seed": s}`` for a seeded reset, or
``{"rng": ...}``, the env's bit-generator state just before an unseeded reset) and the
npz holds the ``actions`` stepped since and the ``obs`` reached. The trainer sends it
back as the slot's ``"episode"`` next iteration. An instance whose cached env is at that
point continues it (warm); any other instance - a new container, another worker, a new
memory size - rebuilds the env by resetting it the same way and replaying the actions,
and checks that it reaches the same observation (``replayed_slots`` counts the slots a
call rebuilt so). Lambda promises no affinity between a slot and a container, so without
this an episode longer than a segment would restart whenever its slot landed elsewhere;
with it, what is learned does not depend on which instance ran which slot, nor on
configuration changes during training. Replaying is timed as init (``init_ms``), as
making the env is. A replay that does not reach the recorded observation (an env that
is not deterministic) falls back to a fresh reset with the slot's seed and is named in
``replay_mismatch``. The actions ride in every event and result, so an episode of many
thousand steps across many slots makes large payloads (the built-in envs end episodes
within 1,000 steps; discrete actions travel as int8 where they fit).

Warm state (a deliberate choice). Env state lives in a module-level cache keyed by
``actor_id`` (by slot, for slot events), so a warm function continues its episodes
across invocations, exactly as a warm Lambda container keeps its globals; a cold one (a
new process, a new container, or a changed env id) makes a fresh env and resets it with
the event's seed, or, for a slot event that carries its episode, replays it (above). A
result's ``cold_start`` means a new instance: for actor events, the actor's env was made
here; for slot events, this is the first event of this ``actor_id`` here (an instance
that gets new slots stays warm; making or replaying their envs is timed as init).
Episodes therefore span rollout segments, as in a vectorised-env PPO, instead of being
cut short at every segment boundary. A segment that ends mid-episode is
*truncated*, not terminated: the result carries ``last_value`` = V(next observation)
so the learner bootstraps it; an episode cut by the env's own time limit carries
V(final observation) in ``trunc_values`` at that step for the same reason.

Trajectory arrays (npz, never pickle): ``obs`` [T, obs_dim], ``actions`` [T] (int64)
or [T, act_dim] (float32, the unclipped sample), ``logprobs``, ``values``,
``rewards`` [T] float32, ``terminated``, ``truncated`` [T] bool, ``trunc_values`` [T]
float32 and ``last_value`` (scalar).
"""

from __future__ import annotations

import json
import time

_MODULE_T0 = time.perf_counter()

from dataclasses import dataclass, field  # noqa: E402
from typing import Any, TypedDict  # noqa: E402

import gymnasium  # noqa: E402,F401  (imported here: its import time is part of a cold start's init)
import numpy as np  # noqa: E402

from core.json_edge import JsonObject  # noqa: E402
from serverless.envs import make_env  # noqa: E402
from serverless.policy import NumpyPolicy, PolicySpec, decode_b64, decode_npz_field, encode_b64  # noqa: E402
from serverless.rollout_event import EpisodeSnapshot, EpisodeStart, RolloutEvent, RolloutReply, SlotEpisode  # noqa: E402

# Import time of this module (numpy, gymnasium): part of a cold start's init.
MODULE_INIT_MS = (time.perf_counter() - _MODULE_T0) * 1000.0

REQUIRED_KEYS = ("env_id", "num_steps", "seed", "policy_spec", "actor_id")


def _queued_ns() -> int | None:
    """How long this thread has waited on a run queue, runnable but not running, in ns
    (``/proc/thread-self/schedstat``'s second field; None where there is none). A handler's
    wall time on a host it shares with other work includes that wait, which its own code did
    not spend: the handler reports it (``timings.queued_ms``) so its CPU share can leave it out."""
    try:
        with open("/proc/thread-self/schedstat") as fh:
            return int(fh.read().split()[1])
    except (OSError, ValueError, IndexError):
        return None


@dataclass(frozen=True)
class EnvRef:
    """Which env an event asks for: its id and its kwargs (canonical JSON, "{}" for none).

    A cached env is reused only for the same id and kwargs."""

    env_id: str
    kwargs_json: str = "{}"

    @classmethod
    def of(cls, event: RolloutEvent) -> "EnvRef":
        kwargs = event.get("env_kwargs") or {}
        if not isinstance(kwargs, dict):
            raise ValueError(f"env_kwargs must be a JSON object, got {kwargs!r}")
        return cls(str(event["env_id"]), json.dumps(kwargs, sort_keys=True))


@dataclass
class _ActorState:
    """One actor's env, mid-episode, kept between warm invocations.

    For env slots (``replayable``), ``episode_start`` and ``episode_actions`` record how
    the episode in progress began and the (env-side) actions stepped since: enough to
    rebuild it elsewhere by replay."""

    env_ref: EnvRef
    env: Any
    obs: np.ndarray
    episode_return: float = 0.0
    episode_length: int = 0
    episode_start: EpisodeStart = field(default_factory=lambda: EpisodeStart())
    episode_actions: list[Any] = field(default_factory=list)
    replayable: bool = False


class _SegmentRequired(TypedDict):
    """The keys every rollout's segment has."""

    arrays: dict[str, np.ndarray]
    episode_returns: list[float]
    episode_lengths: list[int]
    env_ms: float


class _Segment(_SegmentRequired, total=False):
    """One rollout's arrays and finished episodes (a slot event's, merged, adds the slots' bookkeeping)."""

    episode: SlotEpisode  # a slot's episode in progress, after its segment
    episode_slots: list[int]
    slot_episodes: list[SlotEpisode]
    replayed_slots: int
    replay_mismatch: list[int]


_ACTORS: dict[int, _ActorState] = {}
_SLOTS: dict[int, _ActorState] = {}
# Actor ids that have run slot events here: each stands for a Lambda instance, cold on
# its first event and warm after, whichever slots (and envs to make or replay) it gets.
_SLOT_INSTANCES: set[int] = set()
_module_init_reported = False


def reset_warm_state() -> None:
    """Forget every cached env: the next invocation of each actor is a cold start."""
    global _module_init_reported
    for cache in (_ACTORS, _SLOTS):
        for state in cache.values():
            state.env.close()
        cache.clear()
    _SLOT_INSTANCES.clear()
    _module_init_reported = False


def _validate(event: RolloutEvent) -> None:
    missing = [k for k in REQUIRED_KEYS if k not in event]
    if missing:
        raise ValueError(f"event is missing {missing}; required keys: {list(REQUIRED_KEYS)}")
    if int(event["num_steps"]) < 1:
        raise ValueError(f"num_steps must be >= 1, got {event['num_steps']}")
    slots = event.get("slots")
    if slots is None:
        return
    if not isinstance(slots, list) or not slots:
        raise ValueError("slots must be a non-empty list of {slot, num_steps, seed}")
    for entry in slots:
        if not isinstance(entry, dict) or any(k not in entry for k in ("slot", "num_steps", "seed")):
            raise ValueError(f"each slot needs slot, num_steps and seed; got {entry!r}")
        if int(entry["num_steps"]) < 1:
            raise ValueError(f"slot {entry['slot']}: num_steps must be >= 1, got {entry['num_steps']}")
        episode = entry.get("episode")
        if episode is not None and (
            not isinstance(episode, dict)
            or any(k not in episode for k in ("start", "steps", "replay_npz_b64"))
            or not isinstance(episode["start"], dict)
            or not ({"seed"} == set(episode["start"]) or {"rng"} == set(episode["start"]))
        ):
            raise ValueError(
                f"slot {entry['slot']}: episode must be {{start: {{seed}} or {{rng}}, steps, replay_npz_b64}}; got {episode!r}"
            )
    if sum(int(e["num_steps"]) for e in slots) != int(event["num_steps"]):
        raise ValueError("num_steps must be the sum of the slots' num_steps")


def _cached_env(cache: dict[int, _ActorState], key: int, env_ref: EnvRef, seed: int) -> tuple[_ActorState, bool]:
    """The cached env under ``key`` (warm) or a freshly reset one (cold)."""
    state = cache.get(key)
    if state is not None and state.env_ref == env_ref:
        return state, False
    return _fresh_env(cache, key, env_ref, seed), True


def _fresh_env(cache: dict[int, _ActorState], key: int, env_ref: EnvRef, seed: int) -> _ActorState:
    """A new env under ``key``, reset with ``seed`` (closing the one it replaces)."""
    old = cache.pop(key, None)
    if old is not None:
        old.env.close()
    env = make_env(env_ref.env_id, json.loads(env_ref.kwargs_json), disable_env_checker=True)
    obs, _ = env.reset(seed=seed)
    env.action_space.seed(seed)
    state = _ActorState(
        env_ref=env_ref, env=env, obs=np.asarray(obs, dtype=np.float32), episode_start={"seed": seed},
        replayable=cache is _SLOTS,
    )
    cache[key] = state
    return state


def _rng_state(env: Any) -> JsonObject:
    """The env's bit-generator state (plain ints and strings), to restart an unseeded reset."""
    return dict(env.unwrapped.np_random.bit_generator.state)


def _episode_snapshot(state: _ActorState) -> EpisodeSnapshot:
    """The episode in progress in ``state``, as a slot's ``episode`` (module docstring)."""
    actions = np.asarray(state.episode_actions)
    if actions.size == 0:
        actions = np.zeros(0, dtype=np.float32)
    elif actions.dtype.kind in "iu" and -128 <= actions.min() and actions.max() <= 127:
        actions = actions.astype(np.int8)
    return {
        "start": state.episode_start,
        "steps": len(state.episode_actions),
        "replay_npz_b64": encode_b64({"actions": actions, "obs": state.obs}),
    }


def _is_at(state: _ActorState | None, env_ref: EnvRef, episode: EpisodeSnapshot) -> bool:
    """Whether a cached env is exactly at ``episode``'s point (so it continues warm)."""
    return (
        state is not None
        and state.env_ref == env_ref
        and state.episode_start == episode["start"]
        and len(state.episode_actions) == int(episode["steps"])
    )


def _replayed_env(cache: dict[int, _ActorState], key: int, env_ref: EnvRef, episode: EpisodeSnapshot) -> _ActorState | None:
    """A new env under ``key`` brought to ``episode``'s point by replaying its actions, or
    None when the replay does not reach the recorded observation."""
    start = episode["start"]
    replay = decode_b64(episode["replay_npz_b64"])
    actions = replay["actions"].astype(np.int64) if replay["actions"].dtype.kind in "iu" else replay["actions"]
    if "seed" in start:
        state = _fresh_env(cache, key, env_ref, int(start["seed"]))
    else:
        state = _fresh_env(cache, key, env_ref, 0)
        state.env.unwrapped.np_random.bit_generator.state = start["rng"]
        obs, _ = state.env.reset()
        state.obs = np.asarray(obs, dtype=np.float32)
        state.episode_start = start
    obs = state.obs
    for action in actions:
        next_obs, _, terminated, truncated = _step(state, action)
        obs = np.asarray(next_obs, dtype=np.float32)
        if terminated or truncated:
            break
    state.obs = obs
    if len(state.episode_actions) != int(episode["steps"]) or not np.array_equal(obs, replay["obs"]):
        return None
    return state


def _step(state: _ActorState, action: Any) -> tuple[Any, float, bool, bool]:
    """One env step with the episode's bookkeeping (return, length and, for a replayable
    env, the action), the same for live steps and replayed ones."""
    next_obs, reward, terminated, truncated, _ = state.env.step(action)
    if state.replayable:
        state.episode_actions.append(action)
    state.episode_return += float(reward)
    state.episode_length += 1
    return next_obs, float(reward), bool(terminated), bool(truncated)


def _actor_state(actor_id: int, env_ref: EnvRef, seed: int) -> tuple[_ActorState, bool]:
    """The cached env for ``actor_id`` (warm) or a freshly reset one (cold)."""
    return _cached_env(_ACTORS, actor_id, env_ref, seed)


def _slot_rollouts(policy: NumpyPolicy, event: RolloutEvent) -> tuple[_Segment, float]:
    """Every slot of a slot event in turn: one result, its segments in the event's order,
    and the milliseconds spent making (or replaying) envs."""
    env_ref = EnvRef.of(event)
    outs, make_ms, mismatched, replayed = [], 0.0, [], 0
    for entry in event["slots"]:
        slot, seed, episode = int(entry["slot"]), int(entry["seed"]), entry.get("episode")
        t_env = time.perf_counter()
        if episode is None:  # a new slot: its env as reset with its seed, whatever ran here before
            if _is_at(_SLOTS.get(slot), env_ref, {"start": {"seed": seed}, "steps": 0}):
                state, cold = _SLOTS[slot], False
            else:
                state, cold = _fresh_env(_SLOTS, slot, env_ref, seed), True
        elif _is_at(_SLOTS.get(slot), env_ref, episode):
            state, cold = _SLOTS[slot], False
        else:
            rebuilt = _replayed_env(_SLOTS, slot, env_ref, episode)
            if rebuilt is None:
                mismatched.append(slot)
            replayed += 1
            state, cold = rebuilt or _fresh_env(_SLOTS, slot, env_ref, seed), True
        if cold:
            make_ms += (time.perf_counter() - t_env) * 1000.0
        outs.append(rollout(policy, state, int(entry["num_steps"]), np.random.default_rng(seed)))
        outs[-1]["episode"] = {"slot": slot, **_episode_snapshot(state)}
    arrays = {
        k: np.concatenate([o["arrays"][k] for o in outs])
        for k in outs[0]["arrays"] if k != "last_value"
    }
    arrays["last_value"] = np.asarray([o["arrays"]["last_value"] for o in outs], dtype=np.float32)
    arrays["segment_lengths"] = np.asarray([int(e["num_steps"]) for e in event["slots"]], dtype=np.int64)
    arrays["segment_slots"] = np.asarray([int(e["slot"]) for e in event["slots"]], dtype=np.int64)
    out = {
        "arrays": arrays,
        "episode_returns": [r for o in outs for r in o["episode_returns"]],
        "episode_lengths": [n for o in outs for n in o["episode_lengths"]],
        "episode_slots": [int(e["slot"]) for e, o in zip(event["slots"], outs) for _ in o["episode_returns"]],
        "slot_episodes": [o["episode"] for o in outs],
        "replayed_slots": replayed,
        "env_ms": sum(o["env_ms"] for o in outs),
    }
    if mismatched:
        out["replay_mismatch"] = mismatched
    return out, make_ms


def rollout(policy: NumpyPolicy, state: _ActorState, num_steps: int, rng: np.random.Generator) -> _Segment:
    """Step ``state.env`` for ``num_steps`` with ``policy``; return arrays and finished episodes."""
    spec = policy.spec
    obs_buf = np.zeros((num_steps, spec.obs_dim), dtype=np.float32)
    if spec.action_kind == "discrete":
        act_buf = np.zeros(num_steps, dtype=np.int64)
        low = high = None
    else:
        act_buf = np.zeros((num_steps, spec.act_dim), dtype=np.float32)
        low = np.asarray(spec.action_low, dtype=np.float32)
        high = np.asarray(spec.action_high, dtype=np.float32)
    logp_buf = np.zeros(num_steps, dtype=np.float32)
    val_buf = np.zeros(num_steps, dtype=np.float32)
    rew_buf = np.zeros(num_steps, dtype=np.float32)
    term_buf = np.zeros(num_steps, dtype=bool)
    trunc_buf = np.zeros(num_steps, dtype=bool)
    trunc_val_buf = np.zeros(num_steps, dtype=np.float32)
    returns: list[float] = []
    lengths: list[int] = []

    env, obs = state.env, state.obs
    clock = time.perf_counter
    env_s = 0.0
    draws = policy.draws(rng, num_steps)  # the same numbers, in order, as one draw per step
    for t in range(num_steps):
        action, logp, value = policy.act_drawn(obs, draws[t])
        obs_buf[t] = obs
        act_buf[t] = action
        logp_buf[t] = logp
        val_buf[t] = value
        env_action = action if low is None else np.clip(action, low, high)
        t_env = clock()
        next_obs, reward, terminated, truncated = _step(state, env_action)
        env_s += clock() - t_env
        rew_buf[t] = reward
        if terminated or truncated:
            term_buf[t] = terminated
            if truncated and not terminated:
                trunc_buf[t] = True
                trunc_val_buf[t] = policy.value(np.asarray(next_obs, dtype=np.float32))
            returns.append(state.episode_return)
            lengths.append(state.episode_length)
            state.episode_return, state.episode_length = 0.0, 0
            state.episode_start, state.episode_actions = {"rng": _rng_state(env)}, []
            t_env = clock()
            next_obs, _ = env.reset()
            env_s += clock() - t_env
        obs = np.asarray(next_obs, dtype=np.float32)
    state.obs = obs
    ended = term_buf[-1] or trunc_buf[-1]
    last_value = np.float32(0.0 if ended else policy.value(obs))
    arrays = {
        "obs": obs_buf,
        "actions": act_buf,
        "logprobs": logp_buf,
        "values": val_buf,
        "rewards": rew_buf,
        "terminated": term_buf,
        "truncated": trunc_buf,
        "trunc_values": trunc_val_buf,
        "last_value": np.asarray(last_value, dtype=np.float32),
    }
    return {"arrays": arrays, "episode_returns": returns, "episode_lengths": lengths, "env_ms": env_s * 1000.0}


# Results whose base64 trajectories exceed this are sized exactly and, past Lambda's 6 MB
# response limit, moved to S3 (the AWS layer sets the bucket on the function).
_OFFLOAD_CHECK_BYTES = 4 * 1024 * 1024


def handler(event: RolloutEvent, context: Any = None) -> RolloutReply:
    """Run one rollout segment; see the module docstring for the event and result."""
    global _module_init_reported
    t0 = time.perf_counter()
    cpu0 = time.process_time()
    queued0 = _queued_ns()
    _validate(event)
    actor_id = int(event["actor_id"])
    seed = int(event["seed"])
    spec = PolicySpec.from_dict(event["policy_spec"])
    policy = NumpyPolicy(spec, decode_npz_field(event, "weights"))

    init_ms = 0.0
    if not _module_init_reported:
        init_ms += MODULE_INIT_MS
        _module_init_reported = True
    if "slots" in event:
        t_roll = time.perf_counter()
        cold = actor_id not in _SLOT_INSTANCES
        _SLOT_INSTANCES.add(actor_id)
        out, make_ms = _slot_rollouts(policy, event)
        init_ms += make_ms
        t_roll += make_ms / 1000.0  # making envs is init, not rollout
    else:
        t_env = time.perf_counter()
        state, cold = _actor_state(actor_id, EnvRef.of(event), seed)
        if cold:
            init_ms += (time.perf_counter() - t_env) * 1000.0
        t_roll = time.perf_counter()
        out = rollout(policy, state, int(event["num_steps"]), np.random.default_rng(seed))
    rollout_ms = (time.perf_counter() - t_roll) * 1000.0
    payload = encode_b64(out["arrays"])
    total_ms = (time.perf_counter() - t0) * 1000.0
    queued1 = _queued_ns()
    result = {
        "trajectories_npz_b64": payload,
        "episode_returns": out["episode_returns"],
        "episode_lengths": out["episode_lengths"],
        **{k: out[k] for k in ("episode_slots", "slot_episodes", "replayed_slots", "replay_mismatch") if k in out},
        "env_steps": int(event["num_steps"]),
        "actor_id": actor_id,
        **({"rollout_id": event["rollout_id"]} if "rollout_id" in event else {}),  # echoed for the trainer's check
        "cold_start": cold,
        "timings": {
            "init_ms": init_ms,
            "rollout_ms": rollout_ms,
            "env_ms": out["env_ms"],
            "total_ms": total_ms,
            "cpu_ms": (time.process_time() - cpu0) * 1000.0,
            "queued_ms": (queued1 - queued0) / 1e6 if queued0 is not None and queued1 is not None else 0.0,
        },
    }
    if len(payload) > _OFFLOAD_CHECK_BYTES:  # cheap pre-check; the exact limit check is in s3_payload
        from serverless import s3_payload  # lazy: boto3 only for results near Lambda's 6 MB limit

        bucket, prefix = s3_payload.offload_bucket_from_env()
        run_id = s3_payload.check_run_id(event.get("run_id"))  # the learner's run: its own trajectories folder
        result = s3_payload.maybe_offload_result(result, bucket, prefix, run_id=run_id)
    return result
