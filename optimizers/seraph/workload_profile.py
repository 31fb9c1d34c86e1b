"""Profiles: what Seraph measured about a workload, cached as JSON files.

A profile holds the raw observations of a short pilot run (one row per iteration:
shape, Lambda-clock rollout time, billed duration, learner time), the gradient noise
scale measured on the way, and what the pilot cost. Models are fitted from the raw
rows each time, so a model change never needs a re-profile.

Files live in ``core.paths.cache_dir("profiles")`` named
``seraph-<key>.json``; the key hashes the workload (env, PPO settings, architecture),
the backend, the hardware fingerprint and :data:`PROFILE_VERSION`. Change any of them
and the key changes, so a stale profile is never reused; a file whose content does not
match its key (edited or truncated) is ignored and replaced. With ``TRAINWISE_STATE`` on S3
(:mod:`core.state`) a profile missing here is fetched from the bucket and a new one is uploaded.
"""

from __future__ import annotations

import json
import math
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Mapping

from optimizers.seraph.models import Observation
from serverless.run_shape import RunShape, RunShapeError
from core import state
from serverless.learner_machines import ThreadScaling
from core.json_edge import JsonObject
from core.paths import cache_dir, fingerprint, hardware_fingerprint

#: Part of every profile's key: raised whenever what a profile holds or how it is measured
#: changes, so that a profile measured otherwise is never reused (docs/experiments holds why).
PROFILE_VERSION = 11


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

    def as_dict(self) -> JsonObject:
        return {"b_noise": self.b_noise, "history": [h.as_dict() for h in self.history], "smoothing_alpha": self.smoothing_alpha}

    @classmethod
    def from_dict(cls, d: JsonObject) -> "ProfileNoise":
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


@dataclass(frozen=True)
class PilotSummary:
    """What profiling cost and what the pilot trained: the whole bill (memory probe + pilot
    training + learner timing) and the pilot's training alone (what a resumed run's
    checkpointed ledger holds), its schedule of shapes, and the probe's and the learner
    timing's own reports (:mod:`optimizers.seraph.memory_probe`, :mod:`optimizers.seraph.pilot`)."""

    iterations: int = 0
    env_steps: int = 0
    cost_usd: float = 0.0
    cost_label: str = ""
    lambda_time_s: float = 0.0
    lambda_time_label: str = ""
    wall_s: float = 0.0
    training_cost_usd: float = 0.0
    training_lambda_time_s: float = 0.0
    final_mean_return: float | None = None
    seed: int | None = None
    schedule: tuple[RunShape, ...] = ()
    memory_probe: Mapping[str, Any] = field(default_factory=dict)
    learner_timing: Mapping[str, Any] = field(default_factory=dict)
    cold_init_s: float = 0.0  # the mean INIT of the pilot's first, cold functions (0: not recorded)

    @property
    def min_actors(self) -> int:
        """The fewest functions the pilot visited (1 without a schedule)."""
        return min((s.actors for s in self.schedule), default=1)

    @property
    def thread_scaling(self) -> ThreadScaling:
        """The update's measured wall-time speed-ups by thread count (the learner timing's
        ``threads_speedup``); a profile without them counts one thread at 1.0."""
        return ThreadScaling.from_dict(self.learner_timing)

    @property
    def requested_sweep(self) -> list[int] | None:
        """The memory sizes the probe was asked for (None when the profile does not say)."""
        sweep = self.memory_probe.get("requested_sweep")
        return None if sweep is None else [int(m) for m in sweep]

    def as_dict(self) -> JsonObject:
        return {
            "iterations": self.iterations, "env_steps": self.env_steps, "cost_usd": self.cost_usd,
            "cost_label": self.cost_label, "lambda_time_s": self.lambda_time_s, "lambda_time_label": self.lambda_time_label,
            "wall_s": self.wall_s, "training_cost_usd": self.training_cost_usd,
            "training_lambda_time_s": self.training_lambda_time_s, "final_mean_return": self.final_mean_return,
            "seed": self.seed, "schedule": [s.to_dict() for s in self.schedule], "memory_probe": dict(self.memory_probe),
            "learner_timing": dict(self.learner_timing), "cold_init_s": self.cold_init_s,
        }

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> "PilotSummary":
        ret = d.get("final_mean_return")
        seed = d.get("seed")
        probe, timing = d.get("memory_probe", {}), d.get("learner_timing", {})
        if not isinstance(probe, dict) or not isinstance(timing, dict):
            raise ValueError("the pilot's memory_probe and learner_timing are mappings")
        ThreadScaling.from_dict(timing)  # a malformed speed-up makes the profile unreadable
        return cls(
            iterations=int(_finite(d.get("iterations", 0))), env_steps=int(_finite(d.get("env_steps", 0))),
            cost_usd=_finite(d.get("cost_usd", 0.0)), cost_label=str(d.get("cost_label", "")),
            lambda_time_s=_finite(d.get("lambda_time_s", 0.0)), lambda_time_label=str(d.get("lambda_time_label", "")),
            wall_s=_finite(d.get("wall_s", 0.0)), training_cost_usd=_finite(d.get("training_cost_usd", 0.0)),
            training_lambda_time_s=_finite(d.get("training_lambda_time_s", 0.0)),
            final_mean_return=None if ret is None else float(ret), seed=None if seed is None else int(seed),
            schedule=tuple(RunShape(int(s["actors"]), int(s["memory_mb"]), int(s["batch"])) for s in d.get("schedule", [])),
            memory_probe=probe, learner_timing=timing, cold_init_s=_finite(d.get("cold_init_s", 0.0)),
        )


@dataclass(frozen=True)
class Profile:
    workload: JsonObject  # the workload's key (Workload.key_dict()): JSON, fingerprinted into the profile's key
    backend: str
    hardware: str
    observations: list[Observation]
    noise: ProfileNoise
    pilot: PilotSummary
    memory_sweep: list[int]
    created_at: float = field(default_factory=time.time)
    version: int = PROFILE_VERSION

    @property
    def key(self) -> str:
        return profile_key(self.workload, self.backend, self.hardware)

    @property
    def b_noise(self) -> float | None:
        return self.noise.b_noise

    def as_dict(self) -> JsonObject:
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
            "pilot": self.pilot.as_dict(),
        }

    @classmethod
    def from_dict(cls, d: JsonObject) -> "Profile":
        return cls(
            workload=d["workload"],
            backend=d["backend"],
            hardware=d["hardware"],
            observations=[Observation.from_dict(o) for o in d["observations"]],
            noise=ProfileNoise.from_dict(d["noise"]),
            pilot=PilotSummary.from_dict(d["pilot"]),
            memory_sweep=[int(m) for m in d["memory_sweep"]],
            created_at=float(d.get("created_at", 0.0)),
            version=int(d.get("version", 0)),
        )


def profile_key(workload: JsonObject, backend: str, hardware: str | None = None) -> str:
    return fingerprint(
        {"workload": workload, "backend": backend, "hardware": hardware or hardware_fingerprint(), "v": PROFILE_VERSION}
    )


def profile_path(workload: JsonObject, backend: str, root: Path | None = None) -> Path:
    return (root or cache_dir("profiles")) / f"seraph-{profile_key(workload, backend)}.json"


def load_profile(workload: JsonObject, backend: str, root: Path | None = None) -> Profile | None:
    """The cached profile for this workload, backend and machine, or None."""
    path = profile_path(workload, backend, root)
    if not state.pull(path):
        return None
    try:
        prof = Profile.from_dict(json.loads(path.read_text(encoding="utf-8")))
    except (OSError, ValueError, KeyError, TypeError, AttributeError, RecursionError, RunShapeError):
        return None  # unreadable, from an older layout or a shape out of range: profile again
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
    if not isinstance(prof.workload, dict):
        return False
    if not isinstance(prof.backend, str) or not isinstance(prof.hardware, str):
        return False
    if not all(m > 0 for m in prof.memory_sweep):
        return False
    for o in prof.observations:  # each shape checked itself when read (RunShapeError above)
        if not all(_number(v) for v in (o.rollout_s, o.billed_s, o.learner_s, o.iteration_s)):
            return False
        if not _number(o.duration_s, allow_none=True) or not all(isinstance(f, bool) for f in (o.cold, o.rollout_only, o.learner_only)):
            return False
    return True


def save_profile(profile: Profile, root: Path | None = None) -> Path:
    from core.results import write_json

    path = write_json((root or cache_dir("profiles")) / f"seraph-{profile.key}.json", profile.as_dict(), with_environment=False)
    state.push(path)
    return path
