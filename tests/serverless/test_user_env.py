"""A user's own Gymnasium env (``module:EnvId``) and env kwargs, on every backend.

Each test writes a tiny env module to ``tmp_path`` (like the acceptance check's Beacon):
its observation is ``[x, speed]``, so a test can see which ``speed`` kwarg reached the env.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import zipfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from core.errors import UserError
from serverless.run_shape import RunShape

ENV_MODULE = '''
import gymnasium as gym
import numpy as np
from gymnasium import spaces


class Drift(gym.Env):
    """Move a point left or right by ``speed``; reward is minus its distance from 0; 20 steps."""

    def __init__(self, speed=0.1):
        self.speed = float(speed)
        self.observation_space = spaces.Box(-10.0, 10.0, (2,), np.float32)
        self.action_space = spaces.Discrete(2)

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        self.x, self.t = float(self.np_random.uniform(-1, 1)), 0
        return self._obs(), {}

    def _obs(self):
        return np.array([self.x, self.speed], np.float32)

    def step(self, a):
        self.t += 1
        self.x += (2 * int(a) - 1) * self.speed
        return self._obs(), -abs(self.x), False, self.t >= 20, {}


gym.register("Drift-v0", entry_point="{module}:Drift")
'''


def _write_env_module(directory: Path, module: str) -> str:
    """Write the Drift env as ``module`` under ``directory``; its ``module:EnvId`` id."""
    (directory / f"{module}.py").write_text(ENV_MODULE.replace("{module}", module))
    return f"{module}:Drift-v0"


@pytest.fixture
def user_env(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[str]:
    """The Drift env's id, its module importable from ``tmp_path`` (on sys.path and PYTHONPATH)."""
    module = f"user_envs_{tmp_path.name.replace('-', '_')}"
    env_id = _write_env_module(tmp_path, module)
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join([str(tmp_path), os.environ.get("PYTHONPATH", "")]))
    yield env_id
    _forget(module)


def _forget(*modules: str) -> None:
    """Unload the test's env modules and unregister Drift-v0, so the next test registers it anew."""
    import gymnasium

    for module in modules:
        sys.modules.pop(module, None)
    gymnasium.registry.pop("Drift-v0", None)


def test_inspect_env_accepts_a_module_env_id(user_env: str) -> None:
    from serverless.envs import inspect_env

    spec = inspect_env(user_env)
    assert (spec.obs_dim, spec.action_kind, spec.act_dim) == (2, "discrete", 2)


def test_a_missing_module_is_one_line_that_says_where_python_looked(tmp_path: Path) -> None:
    from serverless.envs import inspect_env

    with pytest.raises(UserError) as err:
        inspect_env("no_such_user_module:Drift-v0")
    message = str(err.value)
    assert "\n" not in message
    assert "'no_such_user_module' could not be imported" in message and "sys.path" in message


def test_a_module_that_registers_no_such_env_is_one_line(user_env: str) -> None:
    from serverless.envs import inspect_env

    module = user_env.split(":")[0]
    with pytest.raises(UserError) as err:
        inspect_env(f"{module}:Drfit-v0")
    message = str(err.value)
    assert "\n" not in message and "registers no env 'Drfit-v0'" in message and "Drift-v0" in message


@pytest.mark.parametrize(
    "text, problem",
    [("[1, 2]", "JSON object"), ("{speed: 1}", "JSON object"), ('{"speed": NaN}', "plain JSON values")],
)
def test_env_kwargs_must_be_a_json_object_of_plain_values(text: str, problem: str) -> None:
    from serverless.envs import parse_env_kwargs

    with pytest.raises(UserError, match=problem):
        parse_env_kwargs(text)


def test_env_kwargs_parse_to_a_plain_dict() -> None:
    from serverless.envs import parse_env_kwargs

    assert parse_env_kwargs('{"speed": 0.2, "mode": "hard", "sizes": [1, 2]}') == {
        "speed": 0.2, "mode": "hard", "sizes": [1, 2]
    }
    assert parse_env_kwargs(None) == {} and parse_env_kwargs("") == {}


def test_env_kwargs_reach_the_env_in_the_handler(user_env: str) -> None:
    """The rollout event carries the kwargs as JSON; a cached env of other kwargs is not reused."""
    from serverless import handler
    from serverless.policy import decode_b64
    from serverless.network import NetworkSpec
    from serverless.ppo import PPOConfig, PPOLearner
    from serverless.envs import inspect_env
    from serverless.rollout_batch import rollout_events

    learner = PPOLearner(inspect_env(user_env, hidden=(8,)), PPOConfig(network=NetworkSpec((8,))), seed=0)
    run = RunShape(actors=1, memory_mb=1769, batch=8)
    handler.reset_warm_state()
    try:
        for speed in (0.25, 0.5):
            (event,) = rollout_events(user_env, 0, 0, learner, run, env_kwargs={"speed": speed})
            assert json.loads(json.dumps(event))["env_kwargs"] == {"speed": speed}
            obs = decode_b64(handler.handler(event)["trajectories_npz_b64"])["obs"]
            assert set(obs[:, 1].tolist()) == {speed}
        (plain,) = rollout_events(user_env, 0, 0, learner, run)
        assert "env_kwargs" not in plain
        obs = decode_b64(handler.handler(plain)["trajectories_npz_b64"])["obs"]
        assert set(obs[:, 1].astype("float64").round(6).tolist()) == {0.1}
    finally:
        handler.reset_warm_state()


def test_user_import_paths_name_the_module_directory(user_env: str, tmp_path: Path) -> None:
    from serverless.envs import env_module_root, user_import_paths

    assert str(tmp_path.resolve()) in user_import_paths()
    assert env_module_root(user_env) == (tmp_path / f"{user_env.split(':')[0]}.py").resolve()
    assert env_module_root("CartPole-v1") is None


def test_ray_runtime_env_ships_the_module_and_the_project(user_env: str, tmp_path: Path) -> None:
    """The actors' runtime_env carries code, not the driver's paths (py_modules, no PYTHONPATH)."""
    from serverless.backends.ray_backend import env_modules_of, rollout_runtime_env

    root = Path(__file__).resolve().parents[2]
    shipped = rollout_runtime_env(env_modules_of([{"env_id": user_env}, {"env_id": "CartPole-v1"}]))
    assert shipped["py_modules"] == [str(root / "serverless"), str(root / "core"),
                                     str(tmp_path.resolve() / f"{user_env.split(':')[0]}.py")]
    assert "env_vars" not in shipped and "working_dir" not in shipped


def test_the_lambda_zip_ships_the_user_module(user_env: str, tmp_path: Path) -> None:
    from serverless.lambda_package import build_function_zip

    module_file = f"{user_env.split(':')[0]}.py"
    report = build_function_zip(tmp_path / "build" / "rollout.zip", env_id=user_env)
    names = zipfile.ZipFile(tmp_path / "build" / "rollout.zip").namelist()
    assert module_file in names and "serverless/handler.py" in names
    assert report["env_module_files"] == [module_file]
    plain = build_function_zip(tmp_path / "build" / "plain.zip", env_id="CartPole-v1")
    assert "env_module_files" not in plain and module_file not in plain["files"]


def test_the_lambda_zip_ships_a_user_package(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from serverless.lambda_package import build_function_zip

    package = tmp_path / "src" / f"user_pkg_{tmp_path.name.replace('-', '_')}"
    package.mkdir(parents=True)
    (package / "__init__.py").write_text("from . import drift  # noqa: F401\n")
    (package / "drift.py").write_text(ENV_MODULE.replace("{module}", f"{package.name}.drift"))
    monkeypatch.syspath_prepend(str(package.parent))
    try:
        report = build_function_zip(tmp_path / "rollout.zip", env_id=f"{package.name}:Drift-v0")
    finally:
        _forget(package.name, f"{package.name}.drift")
    assert report["env_module_files"] == [f"{package.name}/__init__.py", f"{package.name}/drift.py"]


def test_a_workload_file_and_a_seraph_request_take_the_module_env_and_its_kwargs(user_env: str) -> None:
    from optimizers.spec import parse_spec

    spec = parse_spec({"name": "own", "rl": {"env_id": user_env, "env_kwargs": {"speed": 0.2}, "target_reward": -5}})
    assert spec.rl is not None
    request = spec.rl.request()
    assert (request.env_id, request.env_kwargs) == (user_env, {"speed": 0.2})
    request.check_env()


def test_env_kwargs_are_part_of_the_profile_key_only_when_given() -> None:
    from optimizers.seraph.pilot import workload_for

    plain = workload_for("CartPole-v1", None).key_dict()
    assert "env_kwargs" not in plain
    assert workload_for("CartPole-v1", None, env_kwargs={}).key_dict() == plain
    keyed = workload_for("CartPole-v1", None, env_kwargs={"sutton_barto_reward": True}).key_dict()
    assert keyed == {**plain, "env_kwargs": {"sutton_barto_reward": True}}


def _trainwise(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([str(cwd), str(Path(__file__).resolve().parents[2])])
    return subprocess.run([sys.executable, "-m", "trainwise", "rl", *args], capture_output=True, text=True,
                          timeout=300, env=env, cwd=str(cwd))


def test_rl_train_runs_a_user_module_env_on_the_local_emulator(tmp_path: Path) -> None:
    """Fresh worker processes import the user's module (from PYTHONPATH), with the kwargs."""
    env_id = _write_env_module(tmp_path, "cli_user_envs")
    out = tmp_path / "train.json"
    proc = _trainwise("train", "--env", env_id, "--env-kwargs", '{"speed": 0.3}', "--target-reward", "0",
                      "--max-steps", "256", "--actors", "2", "--batch", "128", "--checkpoint-every", "0",
                      "--no-progress", "--json-out", str(out), cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr[-2000:]
    result = json.loads(out.read_text())
    assert result["env_steps"] == 256 and result["config"]["env_kwargs"] == {"speed": 0.3}


def test_rl_train_on_a_missing_module_is_one_line_exit_2(tmp_path: Path) -> None:
    proc = _trainwise("train", "--env", "no_such_user_module:Drift-v0", "--target-reward", "0", cwd=tmp_path)
    assert proc.returncode == 2
    lines = [line for line in proc.stderr.splitlines() if line.strip()]
    assert len(lines) == 1 and "Traceback" not in proc.stderr
    assert "could not be imported" in lines[0] and "sys.path" in lines[0]


def test_rl_tune_refuses_bad_env_kwargs_naming_the_flag(tmp_path: Path) -> None:
    proc = _trainwise("tune", "--env", "CartPole-v1", "--env-kwargs", "[1]", "--target-reward", "100",
                      "--objective", "cost", "--plan-only", cwd=tmp_path)
    assert proc.returncode == 2 and "Traceback" not in proc.stderr
    assert "--env-kwargs" in proc.stderr or "env kwargs" in proc.stderr
