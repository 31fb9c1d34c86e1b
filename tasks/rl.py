"""Seraph tasks: profile an RL workload, search a configuration, train on functions,
and the report section. Thin wrappers over ``optimizers.seraph`` and ``serverless``.

The profile is the only cached step (its cache key: workload, backend, hardware,
this module's task code; see :mod:`tasks.caching`). Planning is cheap and always
re-run, so a changed objective or constraint never needs a new profile. Training
is never cached: it is the thing being measured.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from prefect import get_run_logger, task

from tasks.caching import PROFILE_CACHE_POLICY
from tasks.progress import Progress
from tasks.report import fmt, md_table, section, table_artifact
from tasks.retry import EXTERNAL_RETRIES
from trainwise.spec import RLSpec


def workload_of(rl: RLSpec) -> dict[str, Any]:
    """The part of the RL spec a profile depends on (its cache key). The target reward,
    objective and constraints are left out: changing them re-plans, not re-profiles."""
    return {"env_id": rl.env_id, "seed": rl.seed, "max_steps": rl.max_steps, "profile": rl.profile.model_dump(mode="json")}


@task(
    name="profile-rl-workload",
    cache_policy=PROFILE_CACHE_POLICY,
    result_serializer="json",
    persist_result=True,
    **EXTERNAL_RETRIES,
)
def profile_rl_workload(workload: dict[str, Any], backend: str) -> dict[str, Any]:
    """Run Seraph's short pilot (a few PPO iterations per probed shape) and return the
    profile as JSON: the observations the performance and cost models are fitted to."""
    from optimizers import seraph

    prof = seraph.profile_workload(_seraph_workload(workload), backend)
    get_run_logger().info("profiled %s on %s: %d observations", workload["env_id"], backend, len(prof.observations))
    return prof.as_dict()


def _seraph_workload(workload: dict[str, Any]) -> Any:
    """Our workload dict in the form ``optimizers.seraph.profile_workload`` takes."""
    from optimizers import seraph

    p = workload["profile"]
    return seraph.workload_for(
        workload["env_id"],
        seed=workload["seed"],
        max_steps=workload["max_steps"],
        iterations=p["iterations"],
        memory_mb=p["memory_mb"],
        actors=p["actors"],
    )


def _objective_and_constraints(rl: dict[str, Any]) -> tuple[Any, Any]:
    from optimizers.seraph.search import Constraints, Objective

    return Objective(rl["objective"], rl["weight"]), Constraints(rl["deadline_s"], rl["budget_usd"])


@task(name="search-rl-configuration")
def plan_rl_configuration(profile: dict[str, Any], rl: dict[str, Any]) -> dict[str, Any]:
    """Score every (actors, memory, batch) shape with the profile's models and pick one
    for the objective under the constraints (all figures modelled)."""
    from optimizers import seraph
    from optimizers.seraph.profiles import Profile

    objective, constraints = _objective_and_constraints(rl)
    plan = seraph.plan(Profile.from_dict(profile), objective, constraints, target_reward=rl["target_reward"])
    out = plan.as_dict()
    get_run_logger().info("plan: %s, predicted %s", out.get("config"), out.get("predicted"))
    return out


@task(name="train-rl-on-functions", **EXTERNAL_RETRIES)
def train_rl_on_functions(profile: dict[str, Any], rl: dict[str, Any], progress_key: str) -> dict[str, Any]:
    """Train with PPO, rollouts on the backend's functions, re-planning as it goes;
    a progress artifact follows env steps against the budget."""
    from optimizers import seraph
    from optimizers.seraph.profiles import Profile

    objective, constraints = _objective_and_constraints(rl)
    progress = Progress(progress_key, f"Seraph: training {rl['env_id']} to {rl['target_reward']}")

    def on_iteration(it: dict[str, Any]) -> None:
        ret = it.get("mean_return")
        progress.update(
            it["env_steps"] / rl["max_steps"],
            f"{it['env_steps']:,} env steps, mean return {fmt(ret)} (target {rl['target_reward']:g}), "
            f"cost ${it.get('cost_usd', 0.0):.5f}",
        )

    result = seraph.tune_and_train(
        Profile.from_dict(profile),
        objective,
        constraints,
        target_reward=rl["target_reward"],
        max_steps=rl["max_steps"],
        seed=rl["seed"],
        backend=rl["backend"],
        retune=rl["retune"],
        on_iteration=on_iteration,
    )
    achieved = result["achieved"]
    progress.done(f"{'reached' if achieved['reached'] else 'did not reach'} {rl['target_reward']:g}")
    return result


@task(name="render-seraph-section")
def render_seraph_section(
    name: str,
    rl: dict[str, Any],
    profile: dict[str, Any],
    plan: dict[str, Any],
    trained: dict[str, Any],
    profile_cached: bool,
    run_dir: str,
) -> dict[str, Any]:
    """Plots (reward vs time and cost, Pareto front), table artifacts and the markdown."""
    from optimizers.seraph import render_pareto_png

    from tasks.plots import reward_png

    out = Path(run_dir)
    folder = out / "seraph"
    achieved = trained["achieved"]
    curve = trained.get("curve", [])
    plots = [
        reward_png(curve, folder / "reward.png", target=rl["target_reward"], time_key="lambda_time_s",
                   time_label=f"time on Lambda (s, {achieved.get('lambda_time_label', 'modelled')})",
                   cost_label="cost (USD, modelled price table)", title=f"{rl['env_id']}: reward vs time and cost"),
        render_pareto_png(trained.get("plan", plan), folder / "pareto.png"),
    ]
    chosen = (trained.get("plan") or plan).get("config") or {}
    predicted = (trained.get("plan") or plan).get("predicted") or {}
    compare = [
        {"what": "chosen plan (predicted, modelled)", **chosen, "time_s": predicted.get("time_s"), "cost_usd": predicted.get("cost_usd")},
        {"what": "fastest on the front (predicted)", **_shape(plan.get("fastest")), "time_s": _get(plan.get("fastest"), "predicted_time_s"), "cost_usd": _get(plan.get("fastest"), "predicted_cost_usd")},
        {"what": "cheapest on the front (predicted)", **_shape(plan.get("cheapest")), "time_s": _get(plan.get("cheapest"), "predicted_time_s"), "cost_usd": _get(plan.get("cheapest"), "predicted_cost_usd")},
        {"what": f"achieved ({achieved.get('lambda_time_label', 'modelled')} Lambda clock)", **chosen, "time_s": achieved.get("lambda_time_s"), "cost_usd": achieved.get("cost_usd")},
    ]
    cols = ["what", "actors", "memory_mb", "batch", "time_s", "cost_usd"]
    phases = trained.get("phases", [])
    table_artifact(f"{name}-seraph-plan", [{c: r.get(c) for c in cols} for r in compare], "Seraph: predicted vs achieved")
    if phases:
        table_artifact(f"{name}-seraph-phases", phases, "Seraph: configuration phases during training (re-tuning)")
    md = f"""
**Tuned:** actor functions, their memory size and the batch per update, to train
`{rl['env_id']}` to a mean return of {rl['target_reward']:g} on the `{rl['backend']}` backend,
objective **{rl['objective']}** (deadline {fmt(rl['deadline_s'])} s, budget {fmt(rl['budget_usd'])} USD).

**Profile:** {'cached (reused)' if profile_cached else 'measured (not cached)'}; key `{profile.get('key', '-')}`,
{len(profile.get('observations', []))} observations.

**Chosen configuration:** {chosen.get('actors')} actors x {chosen.get('memory_mb')} MB, batch {chosen.get('batch')}.

**Result:** target {'reached' if achieved.get('reached') else 'NOT reached'}; measured wall time
{fmt(achieved.get('wall_s'))} s on this machine; Lambda-clock time {fmt(achieved.get('lambda_time_s'))} s
({achieved.get('lambda_time_label', 'modelled')}); cost {fmt(achieved.get('cost_usd'))} USD (price table, modelled for local runs).

{md_table(compare, cols)}
{('**Re-tuning phases**' + chr(10) + chr(10) + md_table(phases)) if phases else ''}

![reward vs time and cost](seraph/reward.png)

![cost-vs-time Pareto front (predicted)](seraph/pareto.png)
"""
    summary = {"chosen": chosen, "predicted": predicted, "achieved": achieved, "phases": len(phases)}
    return section("seraph", f"Seraph: {rl['env_id']}", md, plots=plots, summary=summary, profile_cached=profile_cached)


def _shape(c: Any) -> dict[str, Any]:
    if not isinstance(c, dict):
        return {}
    s = c.get("shape", c)
    return {k: s.get(k) for k in ("actors", "memory_mb", "batch")}


def _get(c: Any, key: str) -> Any:
    return c.get(key) if isinstance(c, dict) else None
