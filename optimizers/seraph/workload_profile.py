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

PROFILE_VERSION = 10  # 2: learner CPU time; 3: memory probe, pilot at the smallest batch; 4: probe has 1,769 MB; 5: host-speed-corrected clock, probe stops at the plateau; 6: pilot at one batch, learner timed per batch; 7: env slots by default, pilot within the slots; 8: slot episodes replayed across instances (pilot iterations that replay are not steady state); 9: learner timing in the pilot's rollout waits, pilot visits a count at most twice; 10: probe speed ratios from unrounded durations, short cold calls


@dataclass
class Profile:
    workload: dict[str, Any]
    backend: str
    hardware: str
    observations: list[Observation]
    noise: dict[str, Any]  # {"b_noise": float | None, "history": [...]}
    pilot: dict[str, Any]  # env_steps, iterations, cost_usd, lambda_time_s, wall_s, returns
    memory_sweep: list[int]
    created_at: float = field(default_factory=time.time)
    version: int = PROFILE_VERSION

    @property
    def key(self) -> str:
        return profile_key(self.workload, self.backend, self.hardware)

    @property
    def b_noise(self) -> float | None:
        v = self.noise.get("b_noise")
        return None if v is None else float(v)

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
            "noise": self.noise,
            "pilot": self.pilot,
        }

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> "Profile":
        return cls(
            workload=d["workload"],
            backend=d["backend"],
            hardware=d["hardware"],
            observations=[Observation.from_dict(o) for o in d["observations"]],
            noise=d["noise"],
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
    if not (isinstance(prof.workload, dict) and isinstance(prof.noise, dict) and isinstance(prof.pilot, dict)):
        return False
    if not isinstance(prof.backend, str) or not isinstance(prof.hardware, str):
        return False
    if not _number(prof.noise.get("b_noise"), allow_none=True) or not all(m > 0 for m in prof.memory_sweep):
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
