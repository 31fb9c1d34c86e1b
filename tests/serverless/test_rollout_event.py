"""The rollout event's and reply's TypedDicts name the keys the trainer and the handler really use."""

from __future__ import annotations

from typing import Any

import pytest

from serverless import handler as handler_module
from serverless.envs import inspect_env
from serverless.ppo import PPOConfig, PPOLearner
from serverless.rollout_event import EpisodeSnapshot, HandlerTimings, RolloutEvent, RolloutReply, SlotEntry, SlotEpisode
from serverless.run_shape import RunShape
from serverless.trainer import rollout_events


def _keys_fit(value: dict[str, Any], typed: Any) -> None:
    """Every key of ``value`` is declared by ``typed``, and every key ``typed`` requires is there."""
    declared = typed.__required_keys__ | typed.__optional_keys__
    assert set(value) <= declared, f"undeclared keys in a {typed.__name__}: {sorted(set(value) - declared)}"
    assert typed.__required_keys__ <= set(value), f"missing from a {typed.__name__}: {sorted(typed.__required_keys__ - set(value))}"


@pytest.fixture(autouse=True)
def _cold() -> None:
    handler_module.reset_warm_state()


@pytest.mark.parametrize("steps_per_env", [0, 8])
def test_the_trainers_events_and_the_handlers_replies_have_the_declared_keys(steps_per_env: int) -> None:
    learner = PPOLearner(inspect_env("CartPole-v1"), PPOConfig(), seed=0)
    run = RunShape(actors=2, memory_mb=1769, batch=32)
    events = rollout_events("CartPole-v1", 0, 0, learner, run, steps_per_env=steps_per_env, env_kwargs={"sutton_barto_reward": False})
    replies = []
    for event in events:
        _keys_fit(event, RolloutEvent)
        for slot in event["slots"]:
            _keys_fit(slot, SlotEntry)
        replies.append(handler_module.handler(event | {"rollout_id": [0, event["actor_id"], 0]}, None))
    for reply in replies:
        _keys_fit(reply, RolloutReply)
        _keys_fit(reply["timings"], HandlerTimings)
        for episode in reply.get("slot_episodes", []):
            _keys_fit(episode, SlotEpisode)
    if steps_per_env:  # the next iteration's events carry each slot's episode in progress
        episodes = {e["slot"]: {k: v for k, v in e.items() if k != "slot"} for r in replies for e in r["slot_episodes"]}
        later = rollout_events("CartPole-v1", 0, 1, learner, run, steps_per_env=steps_per_env, slot_episodes=episodes)
        carried = [slot["episode"] for event in later for slot in event["slots"] if "episode" in slot]
        assert carried
        for episode in carried:
            _keys_fit(episode, EpisodeSnapshot)


def test_the_check_reads_an_undeclared_key() -> None:
    with pytest.raises(AssertionError, match="undeclared keys"):
        _keys_fit({"slot": 0, "num_steps": 1, "seed": 2, "steps": 3}, SlotEntry)
    with pytest.raises(AssertionError, match="missing"):
        _keys_fit({"slot": 0, "num_steps": 1}, SlotEntry)


def test_the_local_emulators_replies_have_the_declared_keys() -> None:
    """The emulator adds its own figures (``emulator``) and the worker that ran the call (``lane``)."""
    from serverless.backends.local import LocalBackend
    from serverless.rollout_event import EmulatorFigures

    learner = PPOLearner(inspect_env("CartPole-v1"), PPOConfig(), seed=0)
    events = rollout_events("CartPole-v1", 0, 0, learner, RunShape(actors=1, memory_mb=1769, batch=16))
    backend = LocalBackend(max_workers=1)
    try:
        (inv,) = backend.invoke(events, memory_mb=1769, concurrency=1).invocations
    finally:
        backend.close()
    assert inv.result is not None and {"lane", "emulator"} <= set(inv.result)
    _keys_fit(inv.result, RolloutReply)
    _keys_fit(inv.result["emulator"], EmulatorFigures)
