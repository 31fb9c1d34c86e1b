"""Crash-safe checkpoints: the learner and the run's state as one file, replaced atomically.

A checkpoint is ``checkpoint.npz`` in the checkpoint directory: numpy's zip of arrays,
read with ``allow_pickle=False``. Its ``meta`` entry is JSON (as bytes) holding the
format version, the env id, the policy shape, the trainer's run state and the structure
of the learner's state (model, optimiser, counters, numpy RNG), whose tensors are the
other entries; the torch RNG state is one of them. Nothing is unpickled.

Writing goes through :mod:`core.atomic`: a temporary file with a unique name in the same
directory, flushed and fsynced, then renamed over ``checkpoint.npz`` with one ``os.replace``
(atomic on POSIX), and the directory fsynced. A crash at any moment leaves either the previous
checkpoint or the new one, whole, never a mix of two iterations; a temporary file a crash left
behind is ignored.

Each run has its own folder (:func:`core.paths.unique_dir` under ``checkpoints/<env>-seed<S>/``, unless
the caller names one), so two runs of one env and seed never share a checkpoint. The meta holds
the run's identity (env, env kwargs, seed, starting run shape, PPO settings as specified):
resuming checks it and names every field that differs, and :func:`find_run_dir` picks the
newest folder whose identity matches.

Loading checks the file before it touches the learner: a missing, truncated or corrupt
file, another identity or another policy shape is a :class:`~core.errors.UserError` that says
which and what to do.
"""

from __future__ import annotations

import json
import zipfile
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypedDict

import numpy as np

from core.errors import UserError
from core.json_edge import JsonObject

if TYPE_CHECKING:
    from serverless.ppo import LearnerState
    from serverless.rollout_event import PolicySpecJson
    from serverless.run_state import RunStateJson

CHECKPOINT_FILE = "checkpoint.npz"
FORMAT = "trainwise-checkpoint"
VERSION = 2  # 2: the run's identity in the meta
_LEGACY = ("learner.pt", "trainer.json")


class RunIdentity(TypedDict):
    """What makes a checkpoint a run's (the module's docstring): compared field by field on a resume."""

    env_id: str
    env_kwargs: JsonObject
    seed: int
    run: dict[str, int]  # RunShape.to_dict()
    ppo: JsonObject  # PPOConfig.to_dict()


class CheckpointMeta(TypedDict):
    """The checkpoint's ``meta`` entry (the module's docstring); ``learner`` and ``torch_rng`` are
    :func:`_flatten`'s JSON trees, whose tensors are the file's other entries."""

    format: str
    version: int
    env_id: str
    identity: RunIdentity
    policy_spec: PolicySpecJson
    run_state: RunStateJson
    learner: Any
    torch_rng: Any


# --------------------------------------------------------------------------- state <-> arrays

def _flatten(obj: Any, arrays: dict[str, np.ndarray]) -> Any:
    """``obj`` as JSON, its tensors and arrays moved into ``arrays`` (referenced by key)."""
    import torch

    if isinstance(obj, torch.Tensor):
        key = f"t{len(arrays)}"
        arrays[key] = obj.detach().cpu().numpy()
        return {"__tensor__": key}
    if isinstance(obj, np.ndarray):
        key = f"t{len(arrays)}"
        arrays[key] = obj
        return {"__array__": key}
    if isinstance(obj, dict):
        return {"__dict__": [[k, _flatten(v, arrays)] for k, v in obj.items()]}
    if isinstance(obj, (list, tuple)):
        return {"__list__" if isinstance(obj, list) else "__tuple__": [_flatten(v, arrays) for v in obj]}
    if obj is None or isinstance(obj, (bool, int, float, str)):
        return obj
    raise TypeError(f"cannot checkpoint a {type(obj).__name__}")


def _unflatten(obj: Any, arrays: Any) -> Any:
    import torch

    if isinstance(obj, dict):
        if "__tensor__" in obj:
            return torch.from_numpy(np.array(arrays[obj["__tensor__"]]))
        if "__array__" in obj:
            return np.array(arrays[obj["__array__"]])
        if "__dict__" in obj:
            return {(k if isinstance(k, str) else int(k)): _unflatten(v, arrays) for k, v in obj["__dict__"]}
        if "__list__" in obj:
            return [_unflatten(v, arrays) for v in obj["__list__"]]
        if "__tuple__" in obj:
            return tuple(_unflatten(v, arrays) for v in obj["__tuple__"])
        raise ValueError(f"unknown entry {sorted(obj)}")
    return obj


# --------------------------------------------------------------------------- save

def checkpoint_path(directory: Path) -> Path:
    return Path(directory) / CHECKPOINT_FILE


def save_checkpoint(directory: Path, *, identity: RunIdentity, policy_spec: PolicySpecJson, learner_state: LearnerState,
                    run_state: RunStateJson) -> Path:
    """Write one checkpoint atomically (see the module docstring); returns its path.
    ``identity`` is the run's (JSON; ``env_id`` among its keys)."""
    import torch

    from core.atomic import write_with

    arrays: dict[str, np.ndarray] = {}
    meta: CheckpointMeta = {
        "format": FORMAT,
        "version": VERSION,
        "env_id": identity["env_id"],
        "identity": _plain(identity),
        "policy_spec": policy_spec,
        "run_state": run_state,
        "learner": _flatten(learner_state, arrays),
        "torch_rng": _flatten(torch.get_rng_state(), arrays),
    }
    arrays["meta"] = np.frombuffer(json.dumps(meta).encode(), dtype=np.uint8)
    return write_with(checkpoint_path(directory), lambda fh: np.savez(fh, **arrays))


# --------------------------------------------------------------------------- a run's folder and identity

def _plain(obj: Any) -> Any:
    """``obj`` as JSON reads it back (tuples become lists), so identities compare equal."""
    return json.loads(json.dumps(obj, sort_keys=True, default=str))


def identity_differences(saved: JsonObject, current: JsonObject) -> list[str]:
    """One ``field: checkpoint X, this run Y`` line per top-level or nested field that differs."""
    saved, current = _plain(saved), _plain(current)
    out: list[str] = []
    for key in sorted(set(saved) | set(current)):
        a, b = saved.get(key), current.get(key)
        if a == b:
            continue
        if isinstance(a, dict) and isinstance(b, dict):
            out += [f"{key}.{line}" for line in identity_differences(a, b)]
        else:
            out.append(f"{key}: checkpoint {json.dumps(a)}, this run {json.dumps(b)}")
    return out


def runs_root(root: Path, env_id: str, seed: int) -> Path:
    """``root/<env>-seed<S>``: the folder holding one env and seed's run folders."""
    return Path(root) / f"{env_id.replace('/', '_')}-seed{seed}"


def find_run_dir(parent: Path, identity: RunIdentity) -> Path:
    """The newest run folder under ``parent`` whose checkpoint has this identity; a UserError
    naming what differs (from the newest one) when none has, or when there is none."""
    found = sorted((p for p in parent.glob(f"*/{CHECKPOINT_FILE}") if p.is_file()), key=lambda p: p.stat().st_mtime, reverse=True)
    if not found:
        raise UserError(f"resume: no checkpoint under {parent}; start without --resume, or give --checkpoint-dir")
    first_diff: list[str] = []
    for path in found:
        try:
            meta, _ = read_checkpoint(path.parent)
        except UserError:
            continue  # a damaged or older checkpoint: not this run's
        diff = identity_differences(meta.get("identity") or {}, identity)
        if not diff:
            return path.parent
        first_diff = first_diff or diff
    raise UserError(
        f"resume: no checkpoint under {parent} is of this run; the newest differs in "
        f"{'; '.join(first_diff) or 'its format'}; repeat the run's settings or give --checkpoint-dir"
    )


# --------------------------------------------------------------------------- load

def _bad(path: Path, why: str) -> UserError:
    return UserError(
        f"checkpoint {path} cannot be resumed: {why}; start without resume, or point the checkpoint directory elsewhere"
    )


def read_checkpoint(directory: Path) -> tuple[CheckpointMeta, dict[str, np.ndarray]]:
    """The checkpoint's meta (JSON) and its arrays, fully read and checked for format."""
    path = checkpoint_path(directory)
    if not path.exists():
        legacy = [name for name in _LEGACY if (Path(directory) / name).exists()]
        hint = f" (found {', '.join(legacy)}: an older two-file layout this version does not read)" if legacy else ""
        raise UserError(f"resume: no checkpoint in {directory} (expected {CHECKPOINT_FILE}){hint}")
    try:
        with np.load(path, allow_pickle=False) as data:
            arrays = {key: data[key] for key in data.files}
        meta = json.loads(arrays.pop("meta").tobytes().decode())
    except (zipfile.BadZipFile, OSError, EOFError, ValueError, KeyError, UnicodeDecodeError) as exc:
        raise _bad(path, f"the file is truncated or corrupt ({type(exc).__name__}: {exc})") from None
    if not isinstance(meta, dict) or meta.get("format") != FORMAT:
        raise _bad(path, "it is not a trainwise checkpoint")
    if meta.get("version") != VERSION:
        raise _bad(path, f"format version {meta.get('version')!r}, this version reads {VERSION}")
    missing = [k for k in ("env_id", "identity", "policy_spec", "run_state", "learner", "torch_rng") if k not in meta]
    if missing:
        raise _bad(path, f"it lacks {missing}")
    return meta, arrays


def _policy_shape(data: Any) -> Any:
    """A policy spec as compared across checkpoints (an older one has no activation: it was tanh)."""
    from serverless.policy import PolicySpec

    try:
        return PolicySpec.from_dict(data)
    except (KeyError, TypeError, ValueError, UserError):
        return data


def load_checkpoint(directory: Path, *, identity: RunIdentity, policy_spec: PolicySpecJson, learner: Any,
                    ignore: tuple[str, ...] = ()) -> RunStateJson:
    """Check the checkpoint against this run's identity (but the fields in ``ignore``), restore
    the learner and torch's RNG; return the run state."""
    import torch

    path = checkpoint_path(directory)
    meta, arrays = read_checkpoint(directory)
    saved = {k: v for k, v in meta["identity"].items() if k not in ignore}
    diff = identity_differences(saved, {k: v for k, v in identity.items() if k not in ignore})
    if diff:
        raise _bad(path, "it is another run's (" + "; ".join(diff) + ")")
    if _policy_shape(meta["policy_spec"]) != _policy_shape(policy_spec):
        raise _bad(path, f"its policy shape {meta['policy_spec']} differs from this run's {policy_spec}")
    try:
        learner.load_state_dict(_unflatten(meta["learner"], arrays))
        torch.set_rng_state(_unflatten(meta["torch_rng"], arrays))
    except (KeyError, ValueError, TypeError, RuntimeError) as exc:
        raise _bad(path, f"its learner state does not fit this run ({type(exc).__name__}: {exc})") from None
    return meta["run_state"]
