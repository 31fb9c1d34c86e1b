"""The rollout layout, chosen before the pilot: the baseline's, unless references show better.

The layout is the batch and the env steps each env runs per iteration (env slots,
``PPOConfig.steps_per_env``). Unlike the function count and memory, it changes what PPO
learns, so its effect on the env steps to the target is a learning question that timing
cannot answer. The candidates:

* the **baseline's** (:mod:`optimizers.seraph.baseline`; RLlib's default is batch 4,000 in 2
  envs of 2,000 steps): at this layout the run trains exactly the baseline's trajectory
  whatever the function count, so staying costs nothing in env steps;
* **Seraph's slots** (:data:`~optimizers.seraph.defaults.DEFAULT_STEPS_PER_ENV` steps per
  env) over the env's batch set, and every other slot length with committed reference runs
  for the env (``data/references-spe<N>.json``) over the batches those runs cover; each at
  its reference batch with the fewest env steps to the target, or the largest batch tied
  with it (:func:`~optimizers.seraph.pilot.pilot_batch`'s rule).

Seraph leaves the baseline's layout only for a candidate whose reference runs reached the
target in fewer env steps, where the rank-sum test tells the two sets of runs apart (p <
:data:`~optimizers.seraph.stats.STEPS_TIE_P`): a difference inside the spread between seeds
is no saving. Of several such candidates it takes the one with the fewest env steps. Without
reference runs at the baseline's layout, or at any other, it stays at the baseline's.
The choice happens before the pilot because the pilot is the run's first iterations: it
trains at the chosen layout, and changing the layout afterwards would cost env steps.
"""

from __future__ import annotations

import statistics
from dataclasses import dataclass

from core.json_edge import JsonObject
from serverless.run_shape import RunShape
from optimizers.seraph.references import EnvReferences, ReferenceEntry


@dataclass(frozen=True)
class LayoutRuns:
    """Reference runs at one layout: env steps to the target per seed (measured)."""

    batch: int
    steps_per_env: int
    env_steps: tuple[float, ...]
    source: str

    @property
    def median(self) -> float:
        return float(statistics.median(self.env_steps))

    def as_dict(self) -> JsonObject:
        return {
            "batch": self.batch, "steps_per_env": self.steps_per_env, "runs": len(self.env_steps),
            "median_env_steps": self.median, "source": self.source,
        }


@dataclass(frozen=True)
class LayoutChoice:
    """The layout a run trains at, and why."""

    batch: int
    steps_per_env: int
    at_baseline: bool
    reason: str
    baseline_runs: LayoutRuns | None = None
    slot_runs: LayoutRuns | None = None
    p_value: float | None = None
    fixed: bool = False  # set by the user (--steps-per-env), not chosen
    # the batches the search may use at this layout: () for the env's whole set; at a slot
    # length other than Seraph's default, the batches its reference runs cover
    batches: tuple[int, ...] = ()

    @property
    def references(self) -> str:
        """``"measured"`` when reference runs exist at either layout, else ``"none"``."""
        return "none" if self.baseline_runs is None and self.slot_runs is None else "measured"

    @property
    def baseline_env_steps(self) -> float | None:
        return None if self.baseline_runs is None else self.baseline_runs.median

    def as_dict(self) -> JsonObject:
        return {
            "batch": self.batch,
            "steps_per_env": self.steps_per_env,
            "at_baseline": self.at_baseline,
            "fixed": self.fixed,
            "reason": self.reason,
            "references": self.references,
            "baseline_runs": None if self.baseline_runs is None else self.baseline_runs.as_dict(),
            "slot_runs": None if self.slot_runs is None else self.slot_runs.as_dict(),
            "rank_sum_p": self.p_value,
        }


def _layout_entry(references: EnvReferences, steps_per_env: int) -> ReferenceEntry | None:
    """The env's references measured at slots of ``steps_per_env``, or None."""
    entry = references.entries.get(steps_per_env)
    if entry is None or int(entry.get("steps_per_env", 0) or 0) != steps_per_env:
        return None
    return entry


def _runs_by_batch(entry: ReferenceEntry) -> dict[int, list[float]]:
    """An entry's env steps to the target, per batch."""
    runs: dict[int, list[float]] = {}
    for r in entry.get("runs", []):
        runs.setdefault(int(r["batch"]), []).append(float(r["env_steps"]))
    return runs


def reference_runs(env_id: str, batch: int, steps_per_env: int, references: EnvReferences | None = None) -> LayoutRuns | None:
    """The measured runs of ``env_id`` at exactly this layout (any function count up to the
    slot count trains the same), or None. ``references``: the env's, read already (else read here)."""
    entry = _layout_entry(_read(env_id, references), steps_per_env)
    steps = tuple(_runs_by_batch(entry).get(batch, ())) if entry else ()
    return LayoutRuns(batch, steps_per_env, steps, entry["source"]) if steps else None


def _read(env_id: str, references: EnvReferences | None) -> EnvReferences:
    """``references`` when given, else the env's committed ones."""
    return EnvReferences.read(env_id) if references is None else references


def _slot_runs(entry: ReferenceEntry | None, steps_per_env: int, batches: tuple[int, ...]) -> LayoutRuns | None:
    """The runs of the slot layout's pilot batch: the reference batch with the fewest median
    env steps, or the largest one tied with it, and the runs of every tied batch pooled."""
    from optimizers.seraph.stats import steps_tied_batches

    if entry is None:
        return None
    runs = {b: r for b, r in _runs_by_batch(entry).items() if b in batches}
    if not runs:
        return None
    tied = steps_tied_batches({b: statistics.median(r) for b, r in runs.items()}, runs)
    pooled = tuple(e for b in tied for e in runs[b])
    return LayoutRuns(max(tied), steps_per_env, pooled, entry["source"])


def _referenced_batches(entry: ReferenceEntry | None) -> tuple[int, ...]:
    """The batches an entry has reference runs at."""
    return tuple(sorted(_runs_by_batch(entry))) if entry else ()


def choose_layout(env_id: str, baseline: RunShape, slot_steps: int, slot_batches: tuple[int, ...],
                  references: EnvReferences | None = None) -> LayoutChoice:
    """The layout to pilot and train at (see the module's docstring). ``references``: the
    env's, read already (:class:`~optimizers.seraph.references.EnvReferences`; else read here)."""
    from optimizers.seraph.stats import STEPS_TIE_P, rank_sum_p

    refs = _read(env_id, references)
    base = reference_runs(env_id, baseline.batch, baseline.steps_per_env, refs)
    others = [n for n in refs.slot_lengths if n not in (slot_steps, baseline.steps_per_env)]
    candidates = [(slot_steps, slot_batches)] + [(n, _referenced_batches(_layout_entry(refs, n))) for n in others]
    runs = [(n, batches, r) for n, batches in candidates
            if (r := _slot_runs(_layout_entry(refs, n), n, batches)) is not None]
    stay = f"the baseline's layout (batch {baseline.batch}, {baseline.steps_per_env} steps per env)"
    if not runs:
        why = "no reference runs" if base is None else f"no reference runs with slots of {slot_steps} steps"
        return LayoutChoice(baseline.batch, baseline.steps_per_env, True, f"{stay}: {why} to compare it with", base, None)
    if base is None:
        return LayoutChoice(
            baseline.batch, baseline.steps_per_env, True,
            f"{stay}: no reference runs at it, so no measured saving to leave it for", None, runs[0][2],
        )

    def p_of(r: LayoutRuns) -> float | None:
        return rank_sum_p(r.env_steps, base.env_steps) if len(r.env_steps) >= 3 and len(base.env_steps) >= 3 else None

    def figures(r: LayoutRuns, p: float | None) -> str:
        return (f"{r.median:,.0f} at batch {r.batch} with slots of {r.steps_per_env} "
                f"(rank-sum p = {'n/a' if p is None else f'{p:.3g}'})")

    scored = [(n, batches, r, p_of(r)) for n, batches, r in runs]
    compared = "; ".join(figures(r, p) for _, _, r, p in scored)
    against = f"median env steps to the target {compared}, against {base.median:,.0f} at the baseline's layout"
    better = [s for s in scored if s[3] is not None and s[3] < STEPS_TIE_P and s[2].median < base.median]
    if better:
        n, batches, r, p = min(better, key=lambda s: s[2].median)
        return LayoutChoice(
            r.batch, n, False, f"slots of {n} steps at batch {r.batch}: {against}; fewer at p < {STEPS_TIE_P}",
            base, r, p, batches=() if n == slot_steps else batches,
        )
    n, _, r, p = min(scored, key=lambda s: s[2].median)
    return LayoutChoice(
        baseline.batch, baseline.steps_per_env, True, f"{stay}: {against}; none fewer at p < {STEPS_TIE_P}", base, r, p,
    )


def fixed_layout(env_id: str, baseline: RunShape, steps_per_env: int, batch: int,
                 references: EnvReferences | None = None) -> LayoutChoice:
    """A layout the user fixed (``--steps-per-env``); the baseline's runs still inform the plan."""
    runs = reference_runs(env_id, baseline.batch, baseline.steps_per_env, references)
    return LayoutChoice(
        batch, steps_per_env, (batch, steps_per_env) == baseline.layout,
        f"fixed by the request: {steps_per_env} steps per env", runs,
        None, None, True,
    )
