"""One Seraph job: everything a request implies, worked out once.

A :class:`~optimizers.seraph.request.SeraphRequest` is what the user asked for, validated.
:meth:`SeraphJob.of` turns it into the values every step reads: the rollout layout (the
decision that reads the reference files and runs the rank-sum tests), the workload a
profile is about, what the pilot probes, the objective and constraints, the prices, the
reference point, the parsed fault spec and the baseline. ``profile``, ``plan`` and
``train`` (:mod:`optimizers.seraph.steps`), the Prefect tasks and the RL baselines take
the job; none of them works any of it out again.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from serverless.run_shape import RunShape
from optimizers.seraph.defaults import DEFAULT_STEPS_PER_ENV
from optimizers.seraph.layout import LayoutChoice, choose_layout, fixed_layout
from optimizers.seraph.models import Prices
from optimizers.seraph.objectives import Objective
from optimizers.seraph.pilot import (COST_PILOT_TOP_ACTORS, PILOT_ACTORS, PilotPlan, Workload, batches_for, pilot_batch,
                                     workload_for)
from optimizers.seraph.reference_points import Reference, reference_for
from optimizers.seraph.request import SeraphRequest
from optimizers.seraph.search import Constraints
from optimizers.seraph.space import DEFAULT_ACTOR_COUNTS, DEFAULT_MEMORY_SWEEP, SearchSpace

if TYPE_CHECKING:
    from optimizers.seraph.references import EnvReferences
    from serverless.backends.faults import FaultSpec
    from serverless.presets import Preset
    from optimizers.seraph.workload_profile import Profile


@dataclass(frozen=True)
class SeraphJob:
    """A request with its layout, workload, pilot, prices, reference and faults settled."""

    request: SeraphRequest
    layout: LayoutChoice
    workload: Workload
    pilot: PilotPlan
    objective: Objective
    constraints: Constraints
    prices: Prices
    reference: Reference
    episode_steps: int
    faults: "FaultSpec | None"

    @classmethod
    def of(cls, request: SeraphRequest, price_table: Path | None = None) -> "SeraphJob":
        """The job ``request`` asks for: the env's preset looked up, its reference files and the
        price table read, and its workload built, once each."""
        from optimizers.seraph.references import EnvReferences
        from serverless.presets import preset_for

        preset = preset_for(request.env_id)
        references = EnvReferences.read(request.env_id)
        layout, workload = layout_and_workload(request, preset, references)
        return cls(
            request=request,
            layout=layout,
            workload=workload,
            pilot=pilot_plan_of(request, layout),
            objective=request.objective_obj(),
            constraints=Constraints(request.deadline_s, request.budget_usd),
            prices=prices_for(request.architecture, price_table, request.backend, request.backend_options),
            reference=reference_for(request.env_id, workload.max_steps, preset.run.batch, layout.steps_per_env, references),
            episode_steps=episode_time_limit(request.env_id),
            faults=request.faults,
        )

    @property
    def baseline(self) -> RunShape:
        return self.request.baseline_config

    @property
    def profile_key(self) -> str:
        """The key of the profile this job plans with (the key Seraph's file cache stores it under)."""
        from optimizers.seraph.workload_profile import profile_key

        return profile_key(self.workload.key_dict(), self.request.backend)

    def search_space(self, profile: "Profile") -> SearchSpace:
        """The space the planner searches with ``profile``: its probed memory sizes, and no
        fewer functions than its pilot visited; for the cost objective without a deadline, no
        more either (more functions pay on cost only by shortening the learner's wait, which the
        fit's ``log2(actors)`` term extrapolates poorly: from a pilot of 2, 2, 1 functions the
        plan chose 4 on every CartPole seed and paid 1.28x the oracle; modelled)."""
        visited = [s.actors for s in profile.pilot.schedule]
        most = max(visited) if visited and self.pilot.cost_stop_mb is not None else None
        return search_space_for(self.workload, tuple(profile.memory_sweep), profile.pilot.min_actors, most)

    def summary(self) -> dict[str, Any]:
        """The result JSON's ``workload``: the profiled workload plus target, seed and backend."""
        r = self.request
        return {
            **self.workload.key_dict(), "target_reward": r.target_reward, "seed": r.seed, "backend": r.backend,
            "inject_faults": r.faults_text,
        }


def layout_and_workload(request: SeraphRequest, preset: Preset, references: EnvReferences) -> tuple[LayoutChoice, Workload]:
    """The rollout layout the run pilots and trains at (:mod:`optimizers.seraph.layout`): the
    one the request fixes, else the baseline's unless references show better; and the workload
    a profile is about (env, PPO preset, step cap, architecture, layout), built once. At the
    baseline's layout the search keeps the baseline's batch: another batch there has no
    measured steps to the target."""
    base = request.baseline_config
    steps = DEFAULT_STEPS_PER_ENV if request.steps_per_env is None else request.steps_per_env
    workload = workload_for(request.env_id, request.max_steps, request.architecture, steps,
                            env_kwargs=request.env_kwargs, preset=preset)
    if request.steps_per_env is not None:
        batch = pilot_batch(workload, preset, references)
        return fixed_layout(request.env_id, base, steps, batch, references), workload
    layout = choose_layout(request.env_id, base, steps, batches_for(workload, preset), references)
    batches = (layout.batch,) if layout.at_baseline else layout.batches
    # the same workload at the chosen layout: only the slot length and the batches differ
    ppo = {**workload.ppo, "steps_per_env": layout.steps_per_env}
    return layout, replace(workload, ppo=ppo, batches=tuple(batches))


def pilot_plan_of(request: SeraphRequest, layout: LayoutChoice) -> PilotPlan:
    """The baseline's memory size is probed; at the baseline's layout the pilot starts as
    the baseline runs and does not go below its count; the cost objective without a
    deadline may stop the memory probe at one vCPU and starts at most
    :data:`~optimizers.seraph.pilot.COST_PILOT_TOP_ACTORS` cold functions."""
    base = request.baseline_config
    cost_only = request.objective == "cost" and request.deadline_s is None
    return PilotPlan(
        memory_sweep=tuple(sorted({*DEFAULT_MEMORY_SWEEP, base.memory_mb})),
        min_actors=base.actors if layout.at_baseline else 1,
        cost_stop_mb=base.memory_mb if cost_only else None,
        top_actors=COST_PILOT_TOP_ACTORS if cost_only else PILOT_ACTORS[0],
    )


def search_space_for(workload: Workload, memories: tuple[int, ...], min_actors: int = 1,
                     max_actors: int | None = None) -> SearchSpace:
    """The workload's search space. With env slots a function runs at least one slot: more
    functions than ``batch // steps_per_env`` would change the slots, and so what is learned.
    ``min_actors``: the fewest functions the pilot visited; the search does not extrapolate
    below them (:func:`optimizers.seraph.pilot.pilot_schedule`); ``max_actors`` (None: no cap)
    the most it may plan."""
    top = max_actors if max_actors is not None else max(DEFAULT_ACTOR_COUNTS)
    actors = tuple(a for a in DEFAULT_ACTOR_COUNTS if min_actors <= a <= top) or (min_actors,)
    return SearchSpace(actors=actors, memories=memories, batches=batches_for(workload),
                       min_steps_per_actor=max(32, workload.steps_per_env))


def prices_for(architecture: str, price_table: Path | None = None, backend: str = "local",
               backend_options: dict[str, Any] | None = None) -> Prices:
    """The prices of the region the backend bills in (the Lambda config's; serverless.pricing)."""
    from serverless.pricing import PriceTable

    pt = PriceTable.for_run(backend, backend_options, price_table)
    return Prices(
        gb_second_usd=pt.gb_second_price(architecture),
        request_usd=pt.request_usd,
        learner_usd_per_s=pt.vm_usd_per_hour / 3600.0,
        learner_billing="wall",  # the trainer prices the learner VM for the whole iteration
        source=f"serverless/data/prices.json {pt.region}, read {pt.retrieved} ({architecture}, {pt.vm_instance_type} learner)",
        warnings=pt.warnings,
    )


def episode_time_limit(env_id: str) -> int:
    """The env's registered episode step limit (1,000 when it has none)."""
    import gymnasium as gym

    try:
        limit = gym.spec(env_id).max_episode_steps
    except Exception:  # an unregistered id was rejected earlier; be safe
        limit = None
    return int(limit) if limit else 1000

