"""A user's env is checked once at request time (``serverless.envs.check_env_once``): gymnasium's
``check_env`` and the seeded determinism episode replay needs; a failure is one line, warnings
are shown, and the verdict is cached per env source under ``TRAINWISE_HOME``."""

from __future__ import annotations

import sys
import warnings
from collections.abc import Iterator
from pathlib import Path

import pytest

from core.errors import UserError

HEADER = '''
import time
import gymnasium as gym
import numpy as np
from gymnasium import spaces
'''

GOOD = HEADER + '''
class Walk(gym.Env):
    def __init__(self, high=5.0):
        self.observation_space = spaces.Box(-float(high), float(high), (1,), np.float32)
        self.action_space = spaces.Discrete(2)

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        self.x, self.t = float(self.np_random.uniform(-1, 1)), 0
        return np.array([self.x], np.float32), {}

    def step(self, a):
        self.t += 1
        self.x += (2 * int(a) - 1) * 0.1 + float(self.np_random.normal(0, 0.01))
        return np.array([self.x], np.float32), -abs(self.x), False, self.t >= 30, {}
'''

#: reset returns the observation alone (gymnasium 0.2x's API): check_env fails
OLD_API = GOOD.replace("return np.array([self.x], np.float32), {}", "return np.array([self.x], np.float32)")
#: noise from the wall clock, not from the seeded generator: replay cannot rebuild an episode
UNSEEDED = GOOD.replace("float(self.np_random.normal(0, 0.01))", "(time.perf_counter_ns() % 1000) * 1e-5")
#: the same, from the fifth step on: gymnasium's one-step check passes, the replay check does not
UNSEEDED_LATER = GOOD.replace("float(self.np_random.normal(0, 0.01))",
                              "(time.perf_counter_ns() % 1000) * 1e-5 * (self.t > 4)")
#: infinite observation bounds: a warning, not a failure
UNBOUNDED = GOOD.replace("spaces.Box(-float(high), float(high), (1,), np.float32)",
                         "spaces.Box(-np.inf, np.inf, (1,), np.float32)")


@pytest.fixture
def env_module(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[object]:
    """``write(source)`` -> the id ``module:Walk-v0`` of a fresh module holding ``source``."""
    import gymnasium

    from serverless import envs

    monkeypatch.setenv("TRAINWISE_HOME", str(tmp_path / "home"))
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.setattr(envs, "_CHECKED", {})
    written: list[str] = []

    def write(source: str, module: str = "walk_env") -> str:
        module = f"{module}_{tmp_path.name.replace('-', '_')}"
        (tmp_path / f"{module}.py").write_text(source + f'\ngym.register("Walk-v0", entry_point="{module}:Walk")\n')
        sys.modules.pop(module, None)
        gymnasium.registry.pop("Walk-v0", None)
        written.append(module)
        return f"{module}:Walk-v0"

    yield write
    for module in written:
        sys.modules.pop(module, None)
    gymnasium.registry.pop("Walk-v0", None)


def test_a_good_env_passes_once_and_its_verdict_is_cached_by_source(env_module, monkeypatch: pytest.MonkeyPatch) -> None:
    from serverless import envs

    env_id = env_module(GOOD)
    envs.check_env_id(env_id)
    first = envs.check_env_once(env_id, {"high": 5.0})
    assert first.failure is None and not first.cached
    monkeypatch.setattr(envs, "_CHECKED", {})  # a new process: the verdict comes from the cache file
    assert envs.check_env_once(env_id, {"high": 5.0}).cached
    assert not envs.check_env_once(env_id, {"high": 6.0}).cached  # other kwargs: checked anew
    changed = env_module(GOOD + "\n# edited\n")  # the same module name, new source
    envs.check_env_id(changed)
    monkeypatch.setattr(envs, "_CHECKED", {})
    assert not envs.check_env_once(changed, {"high": 5.0}).cached


def test_a_broken_env_is_one_line_from_the_cli(env_module, capsys: pytest.CaptureFixture[str]) -> None:
    from trainwise.cli import main

    env_id = env_module(OLD_API, module="old_api_env")
    assert main(["rl", "train", "--env", env_id, "--target-reward", "10", "--max-steps", "1000"]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "Traceback" not in err, err
    assert err.startswith(f"trainwise: error: env '{env_id}' fails the env check: gymnasium's check_env:")


@pytest.mark.parametrize(("source", "by"), [(UNSEEDED, "gymnasium's check_env"), (UNSEEDED_LATER, "not deterministic")])
def test_an_env_that_replay_cannot_rebuild_fails(env_module, source: str, by: str) -> None:
    from serverless.envs import inspect_env

    env_id = env_module(source, module="unseeded_env")
    with pytest.raises(UserError) as err:
        inspect_env(env_id)
    message = str(err.value)
    assert "\n" not in message and by in message, message
    assert "seed" in message


def test_warnings_are_shown_once_and_do_not_fail(env_module) -> None:
    from serverless.envs import EnvCheckWarning, inspect_env

    env_id = env_module(UNBOUNDED, module="unbounded_env")
    with pytest.warns(EnvCheckWarning, match="infinity"):
        inspect_env(env_id)
    with warnings.catch_warnings():
        warnings.simplefilter("error", EnvCheckWarning)
        inspect_env(env_id)  # the same env again in this process: checked and shown already


def test_gymnasiums_own_envs_pass_without_showing_their_warnings() -> None:
    from serverless.envs import EnvCheckWarning, check_env_once

    with warnings.catch_warnings():
        warnings.simplefilter("error", EnvCheckWarning)
        for env_id in ("CartPole-v1", "Acrobot-v1", "Pendulum-v1"):
            assert check_env_once(env_id).failure is None
