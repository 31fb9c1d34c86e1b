"""Profiles: what Seraph measured about a workload, cached as JSON files.

A profile holds the raw observations of a short pilot run (one row per iteration:
shape, Lambda-clock rollout time, billed duration, learner time), the gradient noise
scale measured on the way, and what the pilot cost. Models are fitted from the raw
rows each time, so a model change never needs a re-profile.

Files live in ``core.paths.cache_dir("profiles")`` named
``seraph-<key>.json``; the key hashes the workload (env, PPO settings, architecture),
the backend, the hardware fingerprint and :data:`PROFILE_VERSION`. Change any of them
and the key changes, so a stale profile is never reused; a file whose content does not
match its key (edited or truncated) is ignored and replaced.
"""

from __future__ import annotations

import json
import math
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from optimizers.seraph.models import Observation
from core.paths import cache_dir, fingerprint, hardware_fingerprint

#: Part of every profile's key: raised whenever what a profile holds or how it is measured
#: changes, so that a profile measured otherwise is never reused (docs/experiments holds why).
PROFILE_VERSION = 10


@dataclass(frozen=True)
class NoisePoint:
    """One gradient-noise probe of the pilot: |G|^2 and tr(Sigma) estimates, and the smoothed
    B_simple after it."""

    env_steps: float
    g2: float
    trace: float
    b_simple: float

    def as_dict(self) -> dict[str, float]:
        return {"env_steps": self.env_steps, "g2": self.g2, "trace": self.trace, "b_simple": self.b_simple}


@dataclass(frozen=True)
class ProfileNoise:
    """The gradient noise scale the pilot measured (None when no probe gave one)."""

    b_noise: float | None = None
    history: tuple[NoisePoint, ...] = ()
    smoothing_alpha: float | None = None

    def as_dict(self) -> dict[str, Any]:
        return {"b_noise": self.b_noise, "history": [h.as_dict() for h in self.history], "smoothing_alpha": self.smoothing_alpha}

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> "ProfileNoise":
        b = d.get("b_noise")
        alpha = d.get("smoothing_alpha")
        history = tuple(
            NoisePoint(float(h["env_steps"]), float(h["g2"]), float(h["trace"]), float(h["b_simple"])) for h in d.get("history", [])
        )
        return cls(b_noise=None if b is None else _finite(b), history=history, smoothing_alpha=None if alpha is None else float(alpha))


def _finite(value: Any) -> float:
    """``value`` as a finite non-negative number (a ValueError otherwise: the profile is unreadable)."""
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value) or value < 0:
        raise ValueError(f"not a finite non-negative number: {value!r}")
    return float(value)


@dataclass
class Profile:
    workload: dict[str, Any]
    backend: str
    hardware: str
    observations: list[Observation]
    noise: ProfileNoise
    pilot: dict[str, Any]  # env_steps, iterations, cost_usd, lambda_time_s, wall_s, returns
    memory_sweep: list[int]
    created_at: float = field(default_factory=time.time)
    version: int = PROFILE_VERSION

    @property
    def key(self) -> str:
        return profile_key(self.workload, self.backend, self.hardware)

    @property
    def b_noise(self) -> float | None:
        return self.noise.b_noise

    def as_dict(self) -> dict[str, Any]:
        return {
            "key": self.key,
            "version": self.version,
            "workload": self.workload,
            "backend": self.backend,
            "hardware": self.hardware,
            "created_at": self.created_at,
            "memory_sweep": self.memory_sweep,
            "observations": [o.as_dict() for o in self.observations],
            "noise": self.noise.as_dict(),
            "pilot": self.pilot,
        }

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> "Profile":
        return cls(
            workload=d["workload"],
            backend=d["backend"],
            hardware=d["hardware"],
            observations=[Observation.from_dict(o) for o in d["observations"]],
            noise=ProfileNoise.from_dict(d["noise"]),
            pilot=d["pilot"],
            memory_sweep=[int(m) for m in d["memory_sweep"]],
            created_at=float(d.get("created_at", 0.0)),
            version=int(d.get("version", 0)),
        )


def profile_key(workload: dict[str, Any], backend: str, hardware: str | None = None) -> str:
    return fingerprint(
        {"workload": workload, "backend": backend, "hardware": hardware or hardware_fingerprint(), "v": PROFILE_VERSION}
    )


def profile_path(workload: dict[str, Any], backend: str, root: Path | None = None) -> Path:
    return (root or cache_dir("profiles")) / f"seraph-{profile_key(workload, backend)}.json"


def load_profile(workload: dict[str, Any], backend: str, root: Path | None = None) -> Profile | None:
    """The cached profile for this workload, backend and machine, or None."""
    path = profile_path(workload, backend, root)
    if not path.exists():
        return None
    try:
        prof = Profile.from_dict(json.loads(path.read_text(encoding="utf-8")))
    except (OSError, ValueError, KeyError, TypeError, AttributeError, RecursionError):
        return None  # unreadable or from an older layout: profile again
    if not _well_formed(prof):
        return None  # a hand-edited or damaged file: profile again rather than fit nonsense
    if prof.version != PROFILE_VERSION or prof.workload != workload or prof.backend != backend:
        return None
    if prof.hardware != hardware_fingerprint():
        return None
    return prof


def _number(value: Any, *, allow_none: bool = False) -> bool:
    if value is None:
        return allow_none
    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value) and value >= 0


def _well_formed(prof: Profile) -> bool:
    """Every field the models read has the type and range they expect."""
    if not (isinstance(prof.workload, dict) and isinstance(prof.pilot, dict)):
        return False
    if not isinstance(prof.backend, str) or not isinstance(prof.hardware, str):
        return False
    if not all(m > 0 for m in prof.memory_sweep):
        return False
    for o in prof.observations:
        shape = (o.shape.actors, o.shape.memory_mb, o.shape.batch)
        if not all(isinstance(v, int) and not isinstance(v, bool) and v >= 1 for v in shape):
            return False
        if not all(_number(v) for v in (o.rollout_s, o.billed_s, o.learner_s, o.iteration_s)):
            return False
        if not _number(o.duration_s, allow_none=True) or not all(isinstance(f, bool) for f in (o.cold, o.rollout_only, o.learner_only)):
            return False
    return True


def save_profile(profile: Profile, root: Path | None = None) -> Path:
    from core.results import write_json

    path = (root or cache_dir("profiles")) / f"seraph-{profile.key}.json"
    return write_json(path, profile.as_dict(), with_environment=False)
