"""Env slots (``PPOConfig.steps_per_env``): the batch is split into env streams that do
not depend on how many functions run them, so the actor count is a systems knob only."""

from __future__ import annotations

import base64
import io
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import torch

from serverless import handler as handler_module
from serverless.envs import inspect_env
from serverless.policy import encode_weights, export_numpy
from serverless.ppo import PPOConfig
from serverless.torch_policy import ActorCritic
from serverless.trainer import TrainSpec, slot_plan, train
from serverless.run_shape import RunShape
from tests.serverless.test_trainer import InProcessBackend
from core.errors import UserError


@pytest.fixture(autouse=True)
def _cold() -> None:
    handler_module.reset_warm_state()


def _trajectories(result: dict) -> dict[str, np.ndarray]:
    with np.load(io.BytesIO(base64.b64decode(result["trajectories_npz_b64"])), allow_pickle=False) as data:
        return {k: data[k] for k in data.files}


def _slot_event(slots: list[tuple[int, int, int]]) -> dict[str, Any]:
    spec = inspect_env("CartPole-v1")
    torch.manual_seed(0)
    weights = encode_weights(export_numpy(ActorCritic(spec)))
    return {
        "env_id": "CartPole-v1",
        "num_steps": sum(n for _, n, _ in slots),
        "seed": 1,
        "policy_spec": spec.to_dict(),
        "actor_id": 0,
        "weights_npz_b64": base64.b64encode(weights).decode(),
        "slots": [{"slot": k, "num_steps": n, "seed": s} for k, n, s in slots],
    }


def test_slot_plan_deals_the_batch_round_robin() -> None:
    assert slot_plan(1024, 1, 128) == [[(k, 128) for k in range(8)]]
    assert slot_plan(1024, 4, 128) == [[(a, 128), (a + 4, 128)] for a in range(4)]
    # the remainder goes to the first slots; every step is dealt exactly once
    plan = slot_plan(1000, 3, 128)
    steps = sorted((k, n) for actor in plan for k, n in actor)
    assert [k for k, _ in steps] == list(range(7)) and sum(n for _, n in steps) == 1000
    assert [n for _, n in steps] == [143] * 6 + [142]
    # more actors than slots: one slot each, the split follows the actor count
    assert slot_plan(256, 4, 128) == [[(a, 64)] for a in range(4)]


def test_a_slot_event_returns_one_segment_per_slot_in_order() -> None:
    result = handler_module.handler(_slot_event([(5, 30, 11), (2, 20, 12)]), None)
    tr = _trajectories(result)
    assert result["env_steps"] == 50 and result["cold_start"] is True
    assert tr["obs"].shape == (50, 4)
    assert tr["segment_lengths"].tolist() == [30, 20] and tr["segment_slots"].tolist() == [5, 2]
    assert tr["last_value"].shape == (2,)
    assert len(result["episode_slots"]) == len(result["episode_returns"])
    assert set(result["episode_slots"]) <= {5, 2}


def test_a_slot_runs_the_same_whichever_event_carries_it() -> None:
    alone = _trajectories(handler_module.handler(_slot_event([(3, 40, 21)]), None))
    handler_module.reset_warm_state()
    shared = _trajectories(handler_module.handler(_slot_event([(0, 25, 20), (3, 40, 21)]), None))
    for key in ("obs", "actions", "rewards", "logprobs"):
        np.testing.assert_array_equal(shared[key][25:], alone[key])


def test_a_warm_slot_continues_its_episode() -> None:
    first = handler_module.handler(_slot_event([(0, 5, 1)]), None)
    second = handler_module.handler(_slot_event([(0, 5, 2)]), None)
    assert first["cold_start"] and not second["cold_start"]
    a, b = _trajectories(first), _trajectories(second)
    if not (a["terminated"][-1] or a["truncated"][-1]):
        assert not np.allclose(b["obs"][0], a["obs"][0])  # no reset between the segments


@pytest.mark.parametrize(
    "slots, match",
    [([], "non-empty"), ([{"slot": 0, "num_steps": 5}], "seed"), ([{"slot": 0, "num_steps": 0, "seed": 1}], "num_steps")],
)
def test_bad_slots_are_errors(slots: list, match: str) -> None:
    event = _slot_event([(0, 5, 1)])
    event["slots"] = slots
    with pytest.raises(ValueError, match=match):
        handler_module.handler(event, None)


def test_slots_must_add_up_to_num_steps() -> None:
    event = _slot_event([(0, 5, 1), (1, 5, 2)])
    event["num_steps"] = 11
    with pytest.raises(ValueError, match="sum"):
        handler_module.handler(event, None)


def test_steps_per_env_must_be_a_whole_number() -> None:
    with pytest.raises(UserError, match="steps_per_env"):
        PPOConfig(steps_per_env=-1)


def _run(tmp_path: Path, actors: int, steps_per_env: int) -> Any:
    handler_module.reset_warm_state()  # every run starts cold, as a new function would
    spec = TrainSpec(
        env_id="CartPole-v1",
        target_reward=1e9,
        max_steps=768,
        run=RunShape(actors=actors, memory_mb=1769, batch=256),
        ppo=PPOConfig(epochs=2, minibatch_size=64, steps_per_env=steps_per_env),
        seed=5,
        checkpoint_every=0,
        checkpoint_dir=tmp_path / f"ckpt-{actors}-{steps_per_env}",
    )
    return train(spec, backend=InProcessBackend(), progress=False)


def _learning(result: Any) -> list[Any]:
    return [(r.episodes, r.mean_return, r.ppo_stats.get("policy_loss"), r.ppo_stats.get("value_loss")) for r in result.iterations]


def test_with_env_slots_the_actor_count_does_not_change_what_is_learned(tmp_path: Path) -> None:
    one, two, four = (_learning(_run(tmp_path, a, steps_per_env=64)) for a in (1, 2, 4))
    assert one[0][2] is not None and len(one) == 3
    assert one == two == four
    # without slots the actor count sets the env streams, and the runs differ
    assert _learning(_run(tmp_path, 1, steps_per_env=0)) != _learning(_run(tmp_path, 4, steps_per_env=0))


# --------------------------------------------------------------------------- episode replay

def _with_episode(event: dict[str, Any], episode: dict[str, Any] | None) -> dict[str, Any]:
    if episode is not None:
        event["slots"][0]["episode"] = {k: v for k, v in episode.items() if k != "slot"}
    return event


def test_another_instance_continues_a_slot_episode_by_replaying_it() -> None:
    # 60 steps of a random-ish CartPole policy cross at least one episode end, so the
    # episode in progress began with an unseeded reset (its start is the env's rng state)
    first = handler_module.handler(_slot_event([(0, 60, 1)]), None)
    (episode,) = first["slot_episodes"]
    assert episode["slot"] == 0 and set(episode["start"]) == {"rng"}
    warm = handler_module.handler(_with_episode(_slot_event([(0, 40, 2)]), episode), None)
    handler_module.reset_warm_state()  # a different instance: nothing cached
    replayed = handler_module.handler(_with_episode(_slot_event([(0, 40, 2)]), episode), None)
    assert "replay_mismatch" not in replayed
    assert warm["replayed_slots"] == 0 and replayed["replayed_slots"] == 1
    a, b = _trajectories(warm), _trajectories(replayed)
    for key in ("obs", "actions", "rewards", "terminated", "logprobs"):
        np.testing.assert_array_equal(a[key], b[key])
    # the replayed episode's return counts its steps before the hand-over too
    assert warm["episode_returns"] == replayed["episode_returns"]


def test_a_seeded_first_episode_replays_from_its_seed() -> None:
    first = handler_module.handler(_slot_event([(4, 3, 7)]), None)
    (episode,) = first["slot_episodes"]
    assert episode["start"] == {"seed": 7} and episode["steps"] == 3
    handler_module.reset_warm_state()
    again = handler_module.handler(_with_episode(_slot_event([(4, 5, 8)]), episode), None)
    assert again["slot_episodes"][0]["steps"] == 8  # 3 replayed + 5 new, one episode


def test_a_replay_that_misses_the_recorded_observation_restarts_the_slot_and_says_so() -> None:
    from serverless.policy import decode_b64, encode_b64

    first = handler_module.handler(_slot_event([(0, 10, 1)]), None)
    (episode,) = first["slot_episodes"]
    replay = decode_b64(episode["replay_npz_b64"])
    episode["replay_npz_b64"] = encode_b64({"actions": replay["actions"], "obs": replay["obs"] + 1.0})
    handler_module.reset_warm_state()
    result = handler_module.handler(_with_episode(_slot_event([(0, 5, 3)]), episode), None)
    assert result["replay_mismatch"] == [0]
    assert result["slot_episodes"][0]["start"] == {"seed": 3} and result["slot_episodes"][0]["steps"] <= 5


def test_a_malformed_episode_is_an_error() -> None:
    event = _slot_event([(0, 5, 1)])
    event["slots"][0]["episode"] = {"start": {"pickle": "x"}, "steps": 1, "replay_npz_b64": ""}
    with pytest.raises(ValueError, match="episode"):
        handler_module.handler(event, None)


def test_a_new_instance_is_cold_once_however_many_slots_it_gets() -> None:
    first = handler_module.handler(_slot_event([(0, 5, 1)]), None)
    more_slots = handler_module.handler(_slot_event([(0, 5, 2), (1, 5, 3)]), None)
    assert first["cold_start"] and not more_slots["cold_start"]


class _NoAffinityBackend(InProcessBackend):
    """Every invocation on a new instance: the worst Lambda can do to warm state."""

    def invoke(self, events: list[dict[str, Any]], memory_mb: int, concurrency: int | None = None) -> Any:
        out = []
        for event in events:
            handler_module.reset_warm_state()
            out.append(super().invoke([event], memory_mb, concurrency))
        batch = out[0]
        batch.invocations = [inv for b in out for inv in b.invocations]
        return batch


class _ActorSweep:
    """A controller that changes the actor count every iteration."""

    def __init__(self, counts: list[int]) -> None:
        self.counts, self.seen = counts, 0

    def after_iteration(self, record: Any) -> RunShape | None:
        self.seen += 1
        return RunShape(actors=self.counts[self.seen % len(self.counts)], memory_mb=1769, batch=256)


def test_without_any_instance_affinity_and_with_changing_actors_the_learning_is_the_same(tmp_path: Path) -> None:
    def run(backend: Any, controller: Any, name: str) -> list[Any]:
        handler_module.reset_warm_state()
        spec = TrainSpec(
            env_id="CartPole-v1",
            target_reward=1e9,
            max_steps=1280,
            run=RunShape(actors=2, memory_mb=1769, batch=256),
            ppo=PPOConfig(epochs=2, minibatch_size=64, steps_per_env=32),
            seed=9,
            checkpoint_every=0,
            checkpoint_dir=tmp_path / name,
        )
        result = train(spec, backend=backend, controller=controller, progress=False)
        assert not any("could not replay" in note for note in result.notes)
        return _learning(result)

    warm = run(InProcessBackend(), None, "warm")
    assert len(warm) == 5 and warm[-1][0] > 0  # episodes finished, so episodes crossed segments
    assert run(_NoAffinityBackend(), _ActorSweep([2, 1, 4, 3]), "no-affinity") == warm


def test_a_resumed_slot_run_continues_its_episodes_in_a_new_process(tmp_path: Path) -> None:
    def spec(max_steps: int, resume: bool, name: str) -> TrainSpec:
        return TrainSpec(
            env_id="CartPole-v1",
            target_reward=1e9,
            max_steps=max_steps,
            run=RunShape(actors=2, memory_mb=1769, batch=256),
            ppo=PPOConfig(epochs=2, minibatch_size=64, steps_per_env=32, anneal_steps=1280),
            seed=4,
            checkpoint_every=1,
            checkpoint_dir=tmp_path / name,
            resume=resume,
        )

    handler_module.reset_warm_state()
    whole = train(spec(1280, False, "whole"), backend=InProcessBackend(), progress=False)
    handler_module.reset_warm_state()
    train(spec(512, False, "split"), backend=InProcessBackend(), progress=False)
    handler_module.reset_warm_state()  # the resumed run is a new process: no env is cached
    resumed = train(spec(1280, True, "split"), backend=InProcessBackend(), progress=False)
    learning = lambda curve: [(c["iteration"], c["env_steps"], c["episodes"], c["mean_return"]) for c in curve]  # noqa: E731
    assert len(resumed.curve) == 5 and resumed.curve[-1]["episodes"] > 0
    assert learning(resumed.curve) == learning(whole.curve)
