"""Which gymnasium envs the runtime can train, checked before any work starts.

Supported: any registered env id whose observation space is a 1-D ``Box`` and whose
action space is ``Discrete`` or a 1-D ``Box``. Anything else is a :class:`UserError`
that says what was found and what is allowed; an unknown id suggests close names.

A user's own env is named in gymnasium's ``module:EnvId`` form: ``gymnasium.make``
imports ``module`` (whose import registers ``EnvId``) and makes the env. The module is
imported here first, so a missing one is a one-line error that says where Python looked.
Env kwargs (:func:`parse_env_kwargs`) are a JSON object of plain values, passed to
``gymnasium.make(env_id, **kwargs)`` wherever an env is made.

Before any work, :func:`inspect_env` also checks the env itself (:func:`check_env_once`):
gymnasium's ``check_env`` (spaces, reset and step signatures, seeding) and the determinism
episode replay needs (two fresh instances reset with one seed and stepped with the same actions
give the same observations; ``serverless.handler`` rebuilds a slot on another instance that
way). The rollout functions make envs with gymnasium's passive checker off, so this is where a
broken env is caught: a failure is one :class:`UserError` line, a warning is an
:class:`EnvCheckWarning`. The verdict is cached under ``TRAINWISE_HOME/env-checks/``, keyed by
the env id, its kwargs, gymnasium's version and the source of the env's module, so an env is
checked once per change, not once per run.
"""

from __future__ import annotations

import difflib
import hashlib
import importlib
import importlib.util
import json
import os
import re
import sys
import warnings
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import numpy as np

from serverless.network import NetworkSpec
from serverless.policy import PolicySpec
from core import paths
from core.errors import UserError
from core.json_edge import JsonObject

#: steps the determinism check takes in each of its two instances (fewer if the episode ends)
DETERMINISM_STEPS = 64
DETERMINISM_SEED = 12345


class EnvCheckWarning(UserWarning):
    """Something gymnasium's env checker or the determinism check found, short of a failure."""


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


def parse_env_kwargs(value: Any) -> JsonObject:
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


def make_env(env_id: str, env_kwargs: JsonObject | None = None, **options: Any) -> Any:
    """``gymnasium.make(env_id, **env_kwargs)`` (``options`` such as ``disable_env_checker``)."""
    import gymnasium as gym

    return gym.make(env_id, **options, **(env_kwargs or {}))


def inspect_env(env_id: str, hidden: tuple[int, ...] = (64, 64), env_kwargs: JsonObject | None = None) -> PolicySpec:
    """Make ``env_id`` once, check its spaces and return the matching :class:`PolicySpec`."""
    from gymnasium import spaces

    check_env_id(env_id)
    try:
        env = make_env(env_id, env_kwargs, disable_env_checker=True)
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
    check_env_once(env_id, env_kwargs)
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


@dataclass(frozen=True)
class EnvVerdict:
    """What checking one env with its kwargs found: ``failure`` (one line) or None, and the
    warnings; ``cached`` when read from an earlier check of the same env source."""

    env_id: str
    kwargs: str
    source: str
    failure: str | None
    warnings: tuple[str, ...] = ()
    cached: bool = False


_CHECKED: dict[str, EnvVerdict] = {}  # this process's verdicts, so warnings show once


def check_env_once(env_id: str, env_kwargs: JsonObject | None = None) -> EnvVerdict:
    """Check ``env_id`` with ``env_kwargs`` (gymnasium's ``check_env`` and seeded determinism)
    unless a verdict for the same env source is cached; warn each warning once; raise a one-line
    :class:`UserError` on a failure."""
    kwargs = json.dumps(env_kwargs or {}, sort_keys=True)
    source = _env_source_hash(env_id)
    key = hashlib.sha256(json.dumps([env_id, kwargs, source, _gym_version()]).encode()).hexdigest()[:24]
    verdict = _CHECKED.get(key)
    if verdict is None:
        verdict = _read_verdict(key) or _write_verdict(key, _check(env_id, env_kwargs or {}, kwargs, source))
        _CHECKED[key] = verdict
        for text in verdict.warnings if _is_users(env_id) else ():  # gymnasium's own envs: known, not news
            warnings.warn(f"env {env_id!r}: {text}", EnvCheckWarning, stacklevel=2)
    if verdict.failure is not None:
        raise UserError(f"env {env_id!r} fails the env check: {verdict.failure}")
    return verdict


def _registration(env_id: str) -> Any:
    """gymnasium's EnvSpec of the id (a ``module:EnvId``'s module is imported already)."""
    import gymnasium as gym

    return gym.spec(env_id.partition(":")[2] if env_module(env_id) else env_id)


def _is_users(env_id: str) -> bool:
    """Whether the env is not one of gymnasium's own (a ``module:EnvId``, or another package's)."""
    entry = _registration(env_id).entry_point
    return env_module(env_id) is not None or not (isinstance(entry, str) and entry.startswith("gymnasium."))


def _gym_version() -> str:
    import gymnasium

    return str(gymnasium.__version__)


def _env_source_hash(env_id: str) -> str:
    """A hash of the source of the module that defines the env (its registration's entry point)
    and of the ``module:`` the id names; "unknown" parts where a module has no source file."""
    modules = [m for m in (env_module(env_id),) if m]
    entry = _registration(env_id).entry_point
    if isinstance(entry, str):
        modules.append(entry.split(":")[0])
    digest = hashlib.sha256()
    for module in dict.fromkeys(modules):
        spec = importlib.util.find_spec(module)
        origin = Path(spec.origin) if spec is not None and spec.origin else None
        digest.update(module.encode())
        digest.update(origin.read_bytes() if origin is not None and origin.is_file() else b"unknown")
    return digest.hexdigest()[:24]


def _one_line(exc: BaseException) -> str:
    text = " ".join(str(exc).split()) or "(no message)"
    return f"{type(exc).__name__}: {text}" if not isinstance(exc, AssertionError) else text


def _plain(message: Warning | str) -> str:
    return " ".join(re.sub(r"\x1b\[[0-9;]*m", "", str(message)).split()).removeprefix("WARN: ")


def _check(env_id: str, env_kwargs: JsonObject, kwargs: str, source: str) -> EnvVerdict:
    """Run both checks on fresh instances; the first failure, and every warning."""
    from gymnasium.utils.env_checker import check_env

    found: list[str] = []
    failure: str | None = None
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        env = make_env(env_id, env_kwargs, disable_env_checker=True)
        try:
            check_env(env.unwrapped, skip_render_check=True)
        except Exception as exc:  # gymnasium raises AssertionError, TypeError, ... for a broken env
            failure = f"gymnasium's check_env: {_one_line(exc)}"
        finally:
            env.close()
        if failure is None:
            failure = _replay_mismatch(env_id, env_kwargs, found)
    found += [_plain(w.message) for w in caught if issubclass(w.category, UserWarning)]  # not an import's deprecation
    found = [*dict.fromkeys(found)]
    return EnvVerdict(env_id, kwargs, source, failure, tuple(found))


def _replay_mismatch(env_id: str, env_kwargs: JsonObject, found: list[str]) -> str | None:
    """Two instances reset with one seed and stepped with the same actions: the first step whose
    observations differ, as a failure line; None when they agree (or the env says it is
    nondeterministic, which is a warning: replay then restarts a moved slot's episode)."""
    if getattr(_registration(env_id), "nondeterministic", False):
        found.append("registered as nondeterministic: a slot rebuilt on another instance restarts its episode")
        return None
    envs = [make_env(env_id, env_kwargs, disable_env_checker=True) for _ in range(2)]
    try:
        obs = [np.asarray(e.reset(seed=DETERMINISM_SEED)[0]) for e in envs]
        envs[0].action_space.seed(DETERMINISM_SEED)
        for step in range(DETERMINISM_STEPS + 1):
            if not np.array_equal(obs[0], obs[1]):
                where = "after reset" if step == 0 else f"at step {step}"
                return (f"not deterministic under a seed: two instances reset with seed {DETERMINISM_SEED} and given "
                        f"the same actions differ {where} (episode replay needs the same observations; seed the "
                        "env's randomness from reset(seed=...) through self.np_random)")
            if step == DETERMINISM_STEPS:
                break
            action = envs[0].action_space.sample()
            outcomes = [e.step(action) for e in envs]
            obs = [np.asarray(o[0]) for o in outcomes]
            if outcomes[0][2] or outcomes[0][3]:
                return None if np.array_equal(obs[0], obs[1]) else (
                    f"not deterministic under a seed: the two instances' last observations differ at step {step + 1}")
    finally:
        for e in envs:
            e.close()
    return None


def _verdict_path(key: str) -> Path:
    return paths.cache_dir("env-checks") / f"{key}.json"


def _read_verdict(key: str) -> EnvVerdict | None:
    try:
        raw = json.loads(_verdict_path(key).read_text())
        return EnvVerdict(**{**raw, "warnings": tuple(raw.get("warnings", ())), "cached": True})
    except (OSError, ValueError, TypeError):
        return None  # no verdict yet, or an unreadable one: check again


def _write_verdict(key: str, verdict: EnvVerdict) -> EnvVerdict:
    """Cache ``verdict`` (atomically); a home that cannot be written only means checking again."""
    try:
        path = _verdict_path(key)
        tmp = path.with_suffix(f".{os.getpid()}.tmp")
        tmp.write_text(json.dumps({k: v for k, v in asdict(verdict).items() if k != "cached"}, indent=1))
        os.replace(tmp, path)
    except OSError:
        pass
    return verdict
