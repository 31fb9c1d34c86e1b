"""Which gymnasium envs the runtime can train, checked before any work starts.

Supported: any registered env id whose observation space is a 1-D ``Box`` and whose
action space is ``Discrete`` or a 1-D ``Box``. Anything else is a :class:`UserError`
that says what was found and what is allowed; an unknown id suggests close names.

A user's own env is named in gymnasium's ``module:EnvId`` form: ``gymnasium.make``
imports ``module`` (whose import registers ``EnvId``) and makes the env. The module is
imported here first, so a missing one is a one-line error that says where Python looked.
Env kwargs (:func:`parse_env_kwargs`) are a JSON object of plain values, passed to
``gymnasium.make(env_id, **kwargs)`` wherever an env is made.
"""

from __future__ import annotations

import difflib
import importlib
import importlib.util
import json
import sys
from pathlib import Path
from typing import Any

import numpy as np

from serverless.network import NetworkSpec
from serverless.policy import PolicySpec
from core.errors import UserError


def _registered_ids() -> list[str]:
    import gymnasium as gym

    return sorted(gym.envs.registry.keys())


def env_module(env_id: str) -> str | None:
    """The module of a ``module:EnvId`` id (None for a plain registry id)."""
    module, colon, _ = env_id.partition(":")
    return module if colon else None


def _import_env_module(module: str, env_id: str) -> None:
    """Import the user's module (its import registers the env); a one-line error if it cannot."""
    try:
        importlib.import_module(module)
    except ModuleNotFoundError as exc:
        if exc.name is None or not (module == exc.name or module.startswith(exc.name + ".")):
            raise UserError(f"env {env_id!r}: importing module {module!r} failed: {exc}") from None
        looked = list(dict.fromkeys(entry or "." for entry in sys.path))
        raise UserError(
            f"env {env_id!r}: module {module!r} could not be imported; looked for it on sys.path "
            f"(the current directory and PYTHONPATH first): {', '.join(looked)}"
        ) from None
    except Exception as exc:  # the user's module raised while importing
        raise UserError(f"env {env_id!r}: importing module {module!r} failed: {type(exc).__name__}: {exc}") from None


def check_env_id(env_id: str) -> None:
    """A registry id, or a ``module:EnvId`` whose module imports and registers ``EnvId``."""
    if not isinstance(env_id, str) or not env_id:
        raise UserError("env id must be a non-empty string such as CartPole-v1")
    module = env_module(env_id)
    name = env_id.partition(":")[2] if module is not None else env_id
    if module is not None:
        if not module or not name:
            raise UserError(f"env id {env_id!r} must be module:EnvId, e.g. my_envs:Beacon-v0")
        _import_env_module(module, env_id)
    ids = _registered_ids()
    if name in ids:
        return
    close = difflib.get_close_matches(name, ids, n=3, cutoff=0.5)
    if module is not None:
        hint = f"; did you mean {', '.join(close)}?" if close else ""
        raise UserError(f"module {module!r} imports but registers no env {name!r} in gymnasium's registry{hint}")
    hint = f"; did you mean {', '.join(close)}?" if close else "; e.g. CartPole-v1, Acrobot-v1, LunarLander-v3"
    raise UserError(f"unknown gymnasium env id {env_id!r} (not in gymnasium's registry){hint}")


def env_module_root(env_id: str) -> Path | None:
    """The file or package directory of a ``module:EnvId`` id's top-level module, when it
    is the user's own (not installed in site-packages); None otherwise.

    This is what a fresh worker process needs on its path (its parent directory) and what
    a Lambda zip must ship."""
    module = env_module(env_id)
    if module is None:
        return None
    spec = importlib.util.find_spec(module.split(".")[0])
    if spec is None or spec.origin is None or not Path(spec.origin).is_file():
        return None
    origin = Path(spec.origin).resolve()
    if any(part in ("site-packages", "dist-packages") for part in origin.parts):
        return None
    return origin.parent if spec.submodule_search_locations else origin


def user_import_paths() -> list[str]:
    """The directories on this process's ``sys.path`` that are the user's (the current
    directory for ``""``, PYTHONPATH, any a script added), not the interpreter's or its
    site-packages: what a fresh worker process needs on its path to import the same env
    modules (a ``module:EnvId``'s module among them)."""
    own = {Path(p).resolve() for p in {sys.prefix, sys.base_prefix, sys.exec_prefix}}
    paths: list[str] = []
    for entry in sys.path:
        path = Path(entry or ".").resolve()
        if not path.is_dir() or any(path == root or root in path.parents for root in own):
            continue
        if str(path) not in paths:
            paths.append(str(path))
    return paths


def parse_env_kwargs(value: Any) -> dict[str, Any]:
    """Env kwargs from JSON text or a mapping: a JSON object of plain values (numbers,
    strings, booleans, null, and lists or objects of them). Empty for None."""
    if value is None or value == "":
        return {}
    if isinstance(value, str):
        try:
            value = json.loads(value)
        except json.JSONDecodeError as exc:
            raise UserError(f"env kwargs must be a JSON object such as '{{\"speed\": 0.2}}': {exc}") from None
    if not isinstance(value, dict) or not all(isinstance(k, str) for k in value):
        raise UserError(f"env kwargs must be a JSON object with string keys, got {value!r}")
    try:
        plain = json.loads(json.dumps(value, allow_nan=False))
    except (TypeError, ValueError) as exc:
        raise UserError(f"env kwargs must be plain JSON values (numbers, strings, booleans, lists): {exc}") from None
    if plain != value:
        raise UserError(f"env kwargs must be plain JSON values (numbers, strings, booleans, lists), got {value!r}")
    return plain


def make_env(env_id: str, env_kwargs: dict[str, Any] | None = None, **options: Any) -> Any:
    """``gymnasium.make(env_id, **env_kwargs)`` (``options`` such as ``disable_env_checker``)."""
    import gymnasium as gym

    return gym.make(env_id, **options, **(env_kwargs or {}))


def inspect_env(env_id: str, hidden: tuple[int, ...] = (64, 64), env_kwargs: dict[str, Any] | None = None) -> PolicySpec:
    """Make ``env_id`` once, check its spaces and return the matching :class:`PolicySpec`."""
    from gymnasium import spaces

    check_env_id(env_id)
    try:
        env = make_env(env_id, env_kwargs)
    except Exception as exc:  # missing optional dependency (box2d, mujoco...), bad kwargs
        raise UserError(f"env {env_id!r} is registered but cannot be created here: {exc}") from None
    try:
        obs_space, act_space = env.observation_space, env.action_space
    finally:
        env.close()
    if not isinstance(obs_space, spaces.Box) or len(obs_space.shape) != 1:
        raise UserError(
            f"env {env_id!r} has observation space {obs_space}; supported: a 1-D Box (flat vector observations)"
        )
    obs_dim = int(obs_space.shape[0])
    if isinstance(act_space, spaces.Discrete):
        if int(act_space.start) != 0:
            raise UserError(f"env {env_id!r} has Discrete action space starting at {act_space.start}; supported: start 0")
        return PolicySpec(obs_dim=obs_dim, action_kind="discrete", act_dim=int(act_space.n), network=NetworkSpec(hidden))
    if isinstance(act_space, spaces.Box) and len(act_space.shape) == 1:
        low = np.asarray(act_space.low, dtype=np.float64)
        high = np.asarray(act_space.high, dtype=np.float64)
        if not (np.all(np.isfinite(low)) and np.all(np.isfinite(high))):
            raise UserError(f"env {env_id!r} has an unbounded Box action space; supported: finite bounds")
        return PolicySpec(
            obs_dim=obs_dim,
            action_kind="continuous",
            act_dim=int(act_space.shape[0]),
            network=NetworkSpec(hidden),
            action_low=tuple(float(x) for x in low),
            action_high=tuple(float(x) for x in high),
        )
    raise UserError(
        f"env {env_id!r} has action space {act_space}; supported: Discrete or a 1-D Box (continuous)"
    )
