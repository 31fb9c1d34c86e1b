"""Reference points for the steps-to-target model: measured runs at several batch sizes.

The gradient noise scale fixes the *shape* of ``E(B) = E_min (1 + B / B_noise)``; its
*level* (and, with more than one point, a fitted ``B_noise``) comes from reference
runs: the trainer's preset PPO at one actor of 1,769 MB, trained to the target at each
batch, over several seeds, median env steps per batch. Run with seeds disjoint from
the ones a benchmark evaluates on (we use 10, 11, 12; ``benchmarks/seraph.py`` uses
0, 1, 2), so the tuner is not calibrated on its test runs.

    python -m optimizers.seraph.references --env CartPole-v1 --target-reward 475 \\
        --batches 512,1024,2048,4000 --seeds 10,11,12

writes (merges into) ``optimizers/seraph/data/references.json``, with every run and the
command, which the planner reads. A run that does not reach the target within the
step cap counts at the cap and is flagged ``censored``. Runs merge by (batch, seed):
re-measuring one batch or adding seeds keeps the other runs, and each point is the
median over all runs at its batch.

``--actors A`` (A > 1) measures the same at A actors and stores it under ``by_actors``:
the planner takes from it how the actor count changes the env steps to the target at
the same batch (more actors: more, shorter, decorrelated episode fragments per batch).

``--steps-per-env N`` measures with env slots of about ``N`` steps
(``PPOConfig.steps_per_env``), which change what PPO learns from a batch, so their
references live in a file of their own, ``references-spe<N>.json`` beside this one
(:func:`references_path`); the tuner reads the file of the slot length it trains with.
"""

from __future__ import annotations

import argparse
import contextlib
import contextvars
import json
import os
import statistics
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Iterable, Iterator, Mapping, TypedDict

from core.errors import UserError
from core.results import write_json
from serverless.run_shape import RunShape

REFERENCES_PATH = Path(__file__).parent / "data" / "references.json"
_IGNORED: contextvars.ContextVar[bool] = contextvars.ContextVar("seraph_references_ignored", default=False)


@contextlib.contextmanager
def references_ignored() -> Iterator[None]:
    """Within it, every env is as one without reference runs (committed or built in): the
    benchmark's ``--ignore-references``, to measure the online decisions on envs that have them."""
    token = _IGNORED.set(True)
    try:
        yield
    finally:
        _IGNORED.reset(token)


#: Set to 1, every env is planned as one without reference runs (as in :func:`references_ignored`):
#: a series of runs then learns from its own history alone.
IGNORE_ENV = "TRAINWISE_IGNORE_REFERENCES"


def ignoring_references() -> bool:
    return _IGNORED.get() or os.environ.get(IGNORE_ENV, "") == "1"
REFERENCE_ACTORS = 1
REFERENCE_MEMORY_MB = 1769


def references_path(steps_per_env: int = 0) -> Path:
    """The references measured with env slots of ``steps_per_env`` steps (0: one env per actor)."""
    return REFERENCES_PATH if steps_per_env <= 0 else REFERENCES_PATH.with_name(f"references-spe{steps_per_env}.json")


def reference_slot_lengths(env_id: str) -> tuple[int, ...]:
    """The slot lengths with committed reference runs of ``env_id`` (``references-spe<N>.json``)."""
    return EnvReferences.read(env_id).slot_lengths


def _slot_files() -> dict[int, Path]:
    """The committed references files measured with env slots, by slot length."""
    files = {}
    for path in REFERENCES_PATH.parent.glob("references-spe*.json"):
        n = path.stem.removeprefix("references-spe")
        if n.isdigit():
            files[int(n)] = path
    return files


class ReferenceRun(TypedDict):
    """One reference run: a batch and seed trained to the target (``censored``: it was not reached)."""

    batch: int
    seed: int
    reached: bool
    env_steps: int
    censored: bool
    wall_s: float


class _ReferenceEntryRequired(TypedDict):
    """The keys every reference entry has."""

    points: list[list[float]]
    actors: int
    memory_mb: int
    target_reward: float
    max_steps: int
    seeds: list[int]
    runs: list[ReferenceRun]
    source: str


class ReferenceEntry(_ReferenceEntryRequired, total=False):
    """An env's measured references (one entry of a references file's ``envs``): the median
    env steps to the target per batch (``points``), the runs they come from and how they were
    measured; :func:`main` adds the command and the date, and other actor counts under ``by_actors``."""

    steps_per_env: int
    command: str
    measured_at: str
    by_actors: dict[str, ReferenceEntry]


def load_references(path: Path | None = None, *, steps_per_env: int = 0) -> dict[str, ReferenceEntry]:
    """The measured references per env id (empty if the file is missing), from ``path``
    or else from the file of ``steps_per_env`` (:func:`references_path`); none while references
    are ignored (:func:`ignoring_references`)."""
    if ignoring_references():
        return {}
    path = references_path(steps_per_env) if path is None else path
    try:
        return json.loads(path.read_text())["envs"]
    except FileNotFoundError:
        return {}


def measured_reference(env_id: str, steps_per_env: int = 0) -> ReferenceEntry | None:
    """The measured entry for ``env_id`` at the slot length ``steps_per_env``
    (:meth:`EnvReferences.measured`; reads that slot length's file and the one without slots)."""
    return EnvReferences.read(env_id, (steps_per_env, 0)).measured(steps_per_env)


@dataclass(frozen=True)
class EnvReferences:
    """One env's committed references, each file read once: per slot length (0: measured
    without env slots, ``references.json``), the env's entry in that slot length's file.
    The layout decision, the pilot's batch and the reference point all read this one value."""

    env_id: str
    entries: Mapping[int, ReferenceEntry]  # slot length -> the env's entry in its file (files without it absent)
    slot_lengths: tuple[int, ...] = ()  # the lengths > 0 whose ``references-spe<N>.json`` has the env

    @classmethod
    def read(cls, env_id: str, lengths: Iterable[int] | None = None) -> "EnvReferences":
        """``env_id``'s entries in the files of ``lengths`` (default: every committed file,
        :func:`references_path`'s and every ``references-spe<N>.json``), each file read once;
        none inside :func:`references_ignored`."""
        files = {0: REFERENCES_PATH, **_slot_files()} if lengths is None else {
            max(n, 0): references_path(n) for n in lengths}
        entries = {}
        for n, path in files.items():
            entry = load_references(path).get(env_id)
            if entry is not None:
                entries[n] = entry
        return cls(env_id, entries, tuple(sorted(n for n in entries if n > 0)))

    def at(self, steps_per_env: int) -> ReferenceEntry | None:
        """The env's entry in the file of ``steps_per_env`` (whatever slot length it says it was measured at)."""
        return self.entries.get(max(steps_per_env, 0))

    def measured(self, steps_per_env: int = 0) -> ReferenceEntry | None:
        """The entry at the slot length ``steps_per_env``; without one, the entry measured
        without slots, its ``source`` saying so (the level is then off by however much slots
        change learning; docs/rl.md, "Env slots"); else None."""
        entry = self.at(steps_per_env)
        if entry is None and steps_per_env > 0:
            entry = self.at(0)
            if entry is not None:
                note = f" (measured without env slots; the run uses slots of {steps_per_env} steps)"
                entry = {**entry, "source": entry["source"] + note}
        return entry


def measure(
    env_id: str, target_reward: float, batches: list[int], seeds: list[int], max_steps: int | None,
    actors: int = REFERENCE_ACTORS, steps_per_env: int = 0,
) -> ReferenceEntry:
    """Train to the target at each batch and seed; the median env steps per batch."""
    from dataclasses import replace

    from serverless.presets import preset_for
    from serverless.trainer import TrainSpec, train

    preset = preset_for(env_id)
    cap = max_steps if max_steps is not None else 3 * preset.max_steps  # the tuner's default cap
    runs: list[ReferenceRun] = []
    for batch in batches:
        for seed in seeds:
            spec = TrainSpec(
                env_id=env_id, target_reward=target_reward, max_steps=cap,
                run=RunShape(actors=actors, memory_mb=REFERENCE_MEMORY_MB, batch=batch),
                ppo=replace(preset.ppo, steps_per_env=steps_per_env), seed=seed, backend="local", checkpoint_every=0,
            )
            t0 = time.perf_counter()
            res = train(spec, progress=False)
            runs.append({
                "batch": batch, "seed": seed, "reached": res.reached, "env_steps": res.env_steps,
                "censored": not res.reached, "wall_s": round(time.perf_counter() - t0, 2),
            })
            print(f"{env_id} batch {batch} seed {seed}: {'reached' if res.reached else 'NOT reached'} "
                  f"at {res.env_steps} env steps", file=sys.stderr)
    return summarise(runs, actors=actors, target_reward=target_reward, max_steps=cap, steps_per_env=steps_per_env)


def summarise(
    runs: list[ReferenceRun], *, actors: int, target_reward: float, max_steps: int, steps_per_env: int = 0
) -> ReferenceEntry:
    """One reference entry from runs: the median env steps per batch over its seeds."""
    all_batches = sorted({r["batch"] for r in runs})
    all_seeds = sorted({r["seed"] for r in runs})
    points = [[b, statistics.median(r["env_steps"] for r in runs if r["batch"] == b)] for b in all_batches]
    return {
        "points": points,
        "actors": actors,
        "memory_mb": REFERENCE_MEMORY_MB,
        "target_reward": target_reward,
        "max_steps": max_steps,
        "steps_per_env": steps_per_env,
        "seeds": all_seeds,
        "runs": runs,
        "source": (
            f"measured: trainer preset PPO, {actors} actor{'s' if actors > 1 else ''} x {REFERENCE_MEMORY_MB} MB, "
            f"{f'env slots of {steps_per_env} steps, ' if steps_per_env > 0 else ''}"
            f"local backend, seeds {','.join(map(str, all_seeds))}, median env steps to {target_reward:g}"
        ),
    }


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description="Measure steps-to-target reference points for Seraph's progress model.")
    p.add_argument("--env", required=True)
    p.add_argument("--target-reward", type=float, required=True)
    p.add_argument("--batches", required=True, help="comma-separated batch sizes, e.g. 512,1024,2048,4000")
    p.add_argument("--seeds", default="10,11,12")
    p.add_argument("--max-steps", type=int, default=None)
    p.add_argument("--actors", type=int, default=REFERENCE_ACTORS, help="actors per run (default 1; others go to by_actors)")
    p.add_argument("--steps-per-env", type=int, default=0,
                   help="env slots of about N steps (PPOConfig.steps_per_env; default 0: one env per actor)")
    p.add_argument("--out", type=Path, default=None, help="default: the references file of --steps-per-env")
    args = p.parse_args(argv)
    try:
        batches = [int(b) for b in args.batches.split(",") if b.strip()]
        seeds = [int(s) for s in args.seeds.split(",") if s.strip()]
    except ValueError:
        raise UserError(f"--batches and --seeds take comma-separated integers, got {args.batches!r} and {args.seeds!r}") from None
    if not batches or not seeds or min(batches) < 1:
        raise UserError("--batches and --seeds each need at least one value; batches must be >= 1")
    if args.actors < 1:
        raise UserError(f"--actors must be >= 1, got {args.actors}")
    if args.steps_per_env < 0:
        raise UserError(f"--steps-per-env must be >= 0 (0 = one env per actor), got {args.steps_per_env}")
    out = references_path(args.steps_per_env) if args.out is None else args.out
    entry = measure(args.env, args.target_reward, batches, seeds, args.max_steps, args.actors, args.steps_per_env)
    envs = load_references(out)  # read after the runs: another measurement may have written meanwhile
    base = envs.get(args.env, {})
    by_actors = dict(base.get("by_actors", {}))
    earlier = base if args.actors == REFERENCE_ACTORS else by_actors.get(str(args.actors), {})
    same = (earlier.get("target_reward"), earlier.get("max_steps"), earlier.get("steps_per_env", 0))
    if same == (args.target_reward, entry["max_steps"], args.steps_per_env):
        new = {(r["batch"], r["seed"]) for r in entry["runs"]}
        kept = [r for r in earlier.get("runs", []) if (r["batch"], r["seed"]) not in new]
        runs = sorted([*kept, *entry["runs"]], key=lambda r: (r["batch"], r["seed"]))
        entry = summarise(
            runs, actors=args.actors, target_reward=args.target_reward, max_steps=entry["max_steps"],
            steps_per_env=args.steps_per_env,
        )
    entry["command"] = "python -m optimizers.seraph.references " + " ".join(argv if argv is not None else sys.argv[1:])
    entry["measured_at"] = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
    if args.actors == REFERENCE_ACTORS:
        envs[args.env] = {**entry, **({"by_actors": by_actors} if by_actors else {})}
    else:
        by_actors[str(args.actors)] = entry
        envs[args.env] = {**base, "by_actors": by_actors}
    write_json(out, {"about": __doc__.split("\n\n")[0], "envs": envs})
    print(json.dumps({"env": args.env, "points": entry["points"]}))
    return 0


if __name__ == "__main__":
    try:
        sys.exit(main())
    except UserError as e:
        print(f"error: {e}", file=sys.stderr)
        sys.exit(2)
