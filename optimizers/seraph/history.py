"""Run history: what every run of a job learned, kept as evidence for the job's next run.

A **job** is what makes two runs comparable: the env (id, kwargs and a hash of the source
of the module that defines it), the target reward, the PPO settings and the step cap
(:class:`JobKey`). The seed is not part of it (a job is trained over many seeds), nor is
the configuration (that is what the runs try). A change to any part of the key gives a new
job with an empty history: a run never reads evidence about another env, target, PPO or cap.

Every run (``rl tune``, ``rl train``, ``rl sweep``, the ``seraph`` flow) records one
:class:`RunRecord`: the arm it ran, each phase's configuration, its seed, whether it
reached the target, env steps, time and cost (modelled on the local emulator, labelled),
and its return against env steps. Records live one file per run at
``TRAINWISE_HOME/history/<job id>--<time>-s<seed>-<random>.json`` (one writer per file, so
concurrent runs never overwrite each other), and with ``TRAINWISE_STATE=s3://...`` in
the bucket as well (:mod:`core.state`). A file that is truncated, not JSON, of another
format version or of another job is named in one line on stderr and ignored.
"""

from __future__ import annotations

import hashlib
import importlib.util
import json
import secrets
import sys
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Mapping

from core import paths, state
from core.results import write_json
from serverless.run_shape import RunShape, RunShapeError

#: The format of a history file; a file of another version is ignored (and named).
FORMAT_VERSION = 1
#: The PPO fields that are a run's configuration, not the job's: the layout and the
#: learning-rate annealing horizon (set from the step cap, which is in the key).
_RUN_PPO_FIELDS = ("steps_per_env", "anneal_steps")
KIND = "history"


def env_source_hash(env_id: str) -> str:
    """A short hash of the source of the module that defines ``env_id``: the user's module
    for ``module:EnvId``, else the module of the registered entry point. A changed env is a
    new job. ``unknown`` when the source cannot be read (a C extension, a lambda)."""
    import gymnasium as gym

    module = env_id.split(":", 1)[0] if ":" in env_id else None
    if module is None:
        try:
            entry = gym.spec(env_id).entry_point
        except Exception:
            return "unknown"
        module = entry.split(":", 1)[0] if isinstance(entry, str) else getattr(entry, "__module__", None)
    try:
        origin = importlib.util.find_spec(module).origin if module else None  # type: ignore[union-attr]
        return hashlib.sha256(Path(origin).read_bytes()).hexdigest()[:16] if origin else "unknown"
    except (ImportError, ValueError, OSError, AttributeError):
        return "unknown"


@dataclass(frozen=True)
class JobKey:
    """What makes runs of a job comparable (see the module's docstring)."""

    env_id: str
    env_kwargs: str  # canonical JSON of gymnasium.make's keyword arguments
    env_source: str  # env_source_hash(env_id)
    target_reward: float
    ppo: str  # canonical JSON of the PPO settings, without the run's own fields
    max_steps: int

    @classmethod
    def of(cls, env_id: str, env_kwargs: dict[str, Any], target_reward: float, ppo: dict[str, Any],
           max_steps: int) -> "JobKey":
        job_ppo = {k: v for k, v in ppo.items() if k not in _RUN_PPO_FIELDS}
        return cls(env_id=env_id, env_kwargs=_canonical(env_kwargs), env_source=env_source_hash(env_id),
                   target_reward=float(target_reward), ppo=_canonical(job_ppo), max_steps=int(max_steps))

    @property
    def id(self) -> str:
        """The key's digest: the prefix of the job's history files."""
        return paths.fingerprint(asdict(self))

    def describe(self) -> str:
        kwargs = "" if self.env_kwargs == "{}" else f" {self.env_kwargs}"
        return f"{self.env_id}{kwargs} to {self.target_reward:g} (cap {self.max_steps} env steps; job {self.id})"


def _canonical(obj: Any) -> str:
    return json.dumps(obj, sort_keys=True, default=str, separators=(",", ":"))


@dataclass(frozen=True)
class Phase:
    """One configuration a run trained at, its layout set (0: one env per function), from
    ``from_env_steps`` on. Written flat: the shape's fields and ``from_env_steps``."""

    shape: RunShape
    from_env_steps: int = 0

    def to_dict(self) -> dict[str, int]:
        return {**self.shape.to_dict(), "from_env_steps": self.from_env_steps}

    @classmethod
    def from_dict(cls, data: Mapping[str, int]) -> "Phase":
        body = dict(data)
        start = int(body.pop("from_env_steps", 0))
        return cls(RunShape.from_dict(body), start)


@dataclass(frozen=True)
class RunRecord:
    """One run of a job: its arm, configurations, outcome and learning curve."""

    key: JobKey
    seed: int
    arm: str  # the arm's name (optimizers.seraph.arms), or "seraph" for the tuner's own first run
    objective: str
    source: str  # the command or flow that ran it
    phases: tuple[Phase, ...]
    reached: bool
    env_steps: int
    lambda_time_s: float
    cost_usd: float
    wall_s: float
    cost_label: str
    # (env steps, mean recent return, cost so far, time so far): the race's evidence
    curve: tuple[tuple[int, float, float, float], ...] = ()
    recorded_at: float = field(default_factory=time.time)

    def to_dict(self) -> dict[str, Any]:
        data = asdict(self)
        data["phases"] = [p.to_dict() for p in self.phases]
        data["format_version"] = FORMAT_VERSION
        data["job_id"] = self.key.id
        return data

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> "RunRecord":
        body = {k: v for k, v in data.items() if k not in ("format_version", "job_id")}
        body["key"] = JobKey(**body["key"])
        body["phases"] = tuple(Phase.from_dict(p) for p in body["phases"])
        body["curve"] = tuple((int(s), float(r), float(c), float(t)) for s, r, c, t in body.get("curve", ()))
        return cls(**body)


def curve_of(points: list[dict[str, Any]]) -> tuple[tuple[int, float, float, float], ...]:
    """A trainer's curve (its per-iteration dicts) as (env steps, mean return, cost, time)."""
    return tuple(
        (int(p["env_steps"]), float(p["mean_return"]), float(p["cost_usd"]), float(p["lambda_time_s"]))
        for p in points if p.get("mean_return") is not None
    )


class History:
    """The runs recorded for one job, read from ``TRAINWISE_HOME/history`` (and S3 state)."""

    def __init__(self, key: JobKey, root: Path | None = None) -> None:
        self.key = key
        self.root = root if root is not None else paths.cache_dir(KIND)
        self.skipped: list[str] = []  # files that could not be used, with the reason
        self._runs: list[RunRecord] | None = None  # read once; a record of this history reads again

    def runs(self) -> list[RunRecord]:
        """The job's runs, oldest first; unusable files are named on stderr (once) and skipped.
        Read once per object: the run's decision and its race see the same evidence."""
        if self._runs is None:
            self._runs = self._load()
        return list(self._runs)

    def _load(self) -> list[RunRecord]:
        state.pull_prefix(KIND, f"{self.key.id}--", self.root)
        records = []
        for path in sorted(self.root.glob(f"{self.key.id}--*.json")):
            record = self._read(path)
            if record is not None:
                records.append(record)
        return sorted(records, key=lambda r: r.recorded_at)

    def _read(self, path: Path) -> RunRecord | None:
        try:
            data = json.loads(path.read_text(encoding="utf-8"))
            version = data.get("format_version") if isinstance(data, dict) else None
            if version != FORMAT_VERSION:
                return self._skip(path, f"format version {version!r}, this trainwise reads {FORMAT_VERSION}")
            record = RunRecord.from_dict(data)
        except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
            return self._skip(path, f"unreadable ({type(exc).__name__}: truncated or not JSON)")
        except (KeyError, TypeError, ValueError, RunShapeError) as exc:
            return self._skip(path, f"not a run record ({type(exc).__name__}: {exc})")
        if record.key != self.key:
            return self._skip(path, "recorded for another job key")
        return record

    def _skip(self, path: Path, why: str) -> None:
        line = f"trainwise: history file {path} ignored: {why}"
        self.skipped.append(line)
        print(line, file=sys.stderr)
        return None

    def record(self, run: RunRecord) -> Path:
        """Write ``run`` as a new file (atomically) and mirror it to S3 state when that is on."""
        if run.key != self.key:
            raise ValueError("a run of another job cannot join this history")
        stamp = time.strftime("%Y%m%d-%H%M%S", time.gmtime(run.recorded_at))
        path = self.root / f"{self.key.id}--{stamp}-s{run.seed}-{secrets.token_hex(4)}.json"
        write_json(path, run.to_dict(), with_environment=False)
        state.push_new(path, KIND)
        self._runs = None
        return path
