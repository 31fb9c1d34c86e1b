"""Seraph tasks: profile an RL workload, search a configuration, train on functions,
and the report section. Thin wrappers over ``optimizers.seraph``'s steps
(``profile`` -> ``plan`` -> ``train``), which take and return its typed request, plan
and result.

The profile is the only cached step (its cache key: workload, backend, hardware,
this module's task code; see :mod:`tasks.caching`); it travels as the profile's JSON.
Planning is cheap and always re-run, so a changed objective or constraint never needs
a new profile. Training is never cached: it is the thing being measured. The plan the
train task receives is the plan task's own output; nothing profiles or plans twice.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from prefect import get_run_logger, task
from prefect.cache_policies import NO_CACHE

from tasks.caching import PROFILE_CACHE_POLICY
from tasks.progress import Progress, ReportingBackend
from tasks.report import fmt, md_table, section, table_artifact
from tasks.retry import EXTERNAL_RETRIES
from core.errors import UserError
from optimizers.seraph.request import SeraphRequest
from optimizers.seraph.result import SeraphPlan, SeraphResult
from optimizers.spec import RLSpec


def workload_of(rl: RLSpec) -> dict[str, Any]:
    """The part of the RL spec a profile depends on (its cache key), as Seraph defines
    it: env (with its PPO preset), step cap and priced architecture, plus the backend
    passed separately. Target reward, seed, objective and constraints are left out:
    changing them re-plans, it does not re-profile. The rollout layout (slot length and the
    batches searched at it) comes from the request's layout choice (optimizers.seraph.layout)."""
    w = rl.request().workload()
    return {"env_id": rl.env_id, "max_steps": rl.max_steps, "architecture": rl.architecture,
            "steps_per_env": w.steps_per_env, "batches": list(w.batches)}


@task(
    name="profile-rl-workload",
    cache_policy=PROFILE_CACHE_POLICY - "seed",  # Seraph's profiles do not depend on the seed
    result_serializer="json",
    persist_result=True,
    **EXTERNAL_RETRIES,
)
def profile_rl_workload(workload: dict[str, Any], backend: str, seed: int = 0) -> dict[str, Any]:
    """Run Seraph's pilot (short real training that sweeps memory sizes, concurrency and
    batch) and return the profile as JSON. Prefect's cache decides whether to profile,
    so Seraph's own file cache is bypassed here (``reuse=False``) and refreshed."""
    from optimizers.seraph.pilot import profile_workload, workload_for

    w = workload_for(workload["env_id"], workload["max_steps"], workload["architecture"],
                     workload["steps_per_env"], tuple(workload["batches"]))
    prof = profile_workload(w, backend, reuse=False, seed=seed).profile
    get_run_logger().info(
        "profiled %s on %s: %d pilot iterations, %s env steps", w.env_id, backend, len(prof.observations), prof.pilot.get("env_steps")
    )
    return prof.as_dict()


@task(name="search-rl-configuration", cache_policy=NO_CACHE)
def plan_rl_configuration(profile: dict[str, Any], request: SeraphRequest) -> SeraphPlan:
    """Score every (actors, memory, batch) shape with the models fitted to the profile
    and pick one for the objective under the constraints (all figures modelled).

    The profile task measured the profile apart from this run (its pilot left no
    checkpoint here), so the plan treats it as reused: training starts from scratch at
    the planned shape, and the pilot's cost belongs to the profile task."""
    from optimizers import seraph

    planned = seraph.plan(seraph.PilotOutcome(seraph.Profile.from_dict(profile), reused=True), request)
    plan = planned.to_dict()
    get_run_logger().info("plan (%s): %s; predicted %s", plan["objective"], plan["config"], plan["predicted"])
    if not planned.feasible:
        raise UserError(f"Seraph found no configuration for this workload: {planned.message}")
    return planned


@task(name="train-rl-on-functions", cache_policy=NO_CACHE, **EXTERNAL_RETRIES)
def train_rl_on_functions(planned: SeraphPlan, progress_key: str) -> SeraphResult:
    """Train to the target with PPO from exactly the planned shape, rollouts on the
    backend's functions, re-planning every few iterations. A progress artifact follows
    the run: the backend is wrapped so every batch of rollouts reports its env steps and
    finished episodes."""
    from optimizers import seraph
    from serverless.backends import make_backend

    request = planned.request
    progress = Progress(progress_key, f"Seraph: training {request.env_id} to {request.target_reward:g}")
    cap = request.workload().max_steps
    target = float(request.target_reward)

    def on_batch(env_steps: int, mean_return: float | None) -> None:
        by_reward = mean_return / target if mean_return is not None and target > 0 else 0.0
        progress.update(
            min(max(by_reward, 0.0), 0.99),
            f"{env_steps:,} env steps of at most {cap:,}; mean return of the last 20 episodes {fmt(mean_return)} "
            f"(target {target:g})",
        )

    # the trainer puts the request's fault injector around it: the report sees the rollouts that ran
    backend = ReportingBackend(make_backend(request.backend), on_batch)
    try:
        result = seraph.train(planned, backend_obj=backend)
    finally:
        backend.close()
    achieved = result.achieved or {}
    progress.done(
        f"{'reached' if achieved.get('reached') else 'did not reach'} {target:g} in "
        f"{achieved.get('env_steps', 0):,} env steps"
    )
    return result


@task(name="train-rl-baseline", **EXTERNAL_RETRIES)
def train_rl_baseline(baseline: str, request: SeraphRequest) -> dict[str, Any]:
    """Train the same workload to the same target at a fixed baseline configuration
    (no profiling, no re-tuning), so the report compares Seraph with a real run."""
    from optimizers.rl_baselines.static import run_static
    from serverless.backends import make_backend

    if baseline != "static":
        raise UserError(f"unknown RL baseline {baseline!r}; allowed: static")
    backend = make_backend(request.backend, faults=request.faults)  # the same faults as Seraph's run
    try:
        out = run_static(request.workload(), target_reward=request.target_reward, seed=request.seed, backend_obj=backend)
    finally:
        backend.close()
    get_run_logger().info("baseline %s: reached=%s in %s env steps", baseline, out.get("reached"), out.get("env_steps"))
    return {"baseline": baseline, **out}


@task(name="render-seraph-section", cache_policy=NO_CACHE)
def render_seraph_section(
    name: str,
    profile: dict[str, Any],
    planned: SeraphPlan,
    result: SeraphResult,
    profile_cached: bool,
    run_dir: str,
    baselines: list[dict[str, Any]] | None = None,
) -> dict[str, Any]:
    """Plots (reward vs time and cost, Pareto front), table artifacts and the markdown."""
    rl, plan, trained = planned.request.to_dict(), planned.to_dict(), result.to_dict()
    achieved = trained.get("achieved") or {}
    plots = _plots(rl, plan, trained, Path(run_dir) / "seraph")
    compare = _compare_rows(plan, achieved, baselines or [])
    phases = _phase_rows(trained)
    table_artifact(f"{name}-seraph-plan", [{c: r.get(c) for c in _COMPARE_COLUMNS} for r in compare], "Seraph: predicted vs achieved time (s) and cost (USD)")
    if phases:
        table_artifact(f"{name}-seraph-phases", [{c: p.get(c) for c in _PHASE_COLUMNS} for p in phases], "Seraph: phases of training (re-tuning): predicted vs measured")
    changes = [d for d in trained.get("decisions") or [] if d.get("changed")]
    md = _markdown(rl, plan, profile, achieved, profile_cached, len(changes)) + f"""
{md_table(compare, _COMPARE_COLUMNS)}
{_versus(achieved, baselines or [])}
**Phases** (predicted by the model vs measured on the Lambda clock):

{md_table(phases, _PHASE_COLUMNS)}
![mean return vs time and cost](seraph/reward.png)

![cost-vs-time Pareto front (predicted)](seraph/pareto.png)
"""
    summary = {
        "chosen": plan.get("config") or {},
        "predicted": plan.get("predicted") or {},
        "achieved": achieved,
        "phases": len(phases),
        "retune_changes": len(changes),
        "baselines": baselines or [],
    }
    return section("seraph", f"Seraph: {rl['env_id']}", md, plots=plots, summary=summary, profile_cached=profile_cached)


def _plots(rl: dict[str, Any], plan: dict[str, Any], trained: dict[str, Any], folder: Path) -> list[Any]:
    """Reward vs time and cost, and the predicted Pareto front, as PNG files in ``folder``."""
    from optimizers.seraph import render_pareto_png

    from tasks.plots import reward_png

    clock = (trained.get("achieved") or {}).get("lambda_time_label", "modelled")
    return [
        reward_png(
            (trained.get("training") or {}).get("curve", []),
            folder / "reward.png",
            target=rl["target_reward"],
            time_key="lambda_time_s",
            time_label=f"time on Lambda (s, {clock})",
            cost_label="cost (USD, price table: modelled)",
            title=f"{rl['env_id']}: mean return vs time and cost",
        ),
        render_pareto_png(plan, folder / "pareto.png"),
    ]


def _markdown(
    rl: dict[str, Any], plan: dict[str, Any], profile: dict[str, Any], achieved: dict[str, Any], profile_cached: bool,
    changes: int,
) -> str:
    """The section's prose: what was tuned, the profile, the chosen shape and the result."""
    chosen = plan.get("config") or {}
    clock = achieved.get("lambda_time_label", "modelled")
    pilot = profile.get("pilot", {})
    return f"""
**Tuned:** the number of actor functions, their memory size and the batch per PPO update, to
train `{rl['env_id']}` to a mean return of {rl['target_reward']:g} on the `{rl['backend']}` backend;
objective **{plan.get('objective')}** (deadline {fmt(rl['deadline_s'])} s, budget {fmt(rl['budget_usd'])} USD).

**Profile:** {'cached (reused from an earlier run)' if profile_cached else 'measured now (not cached)'};
key `{profile.get('key', '-')}`, a pilot of {pilot.get('iterations', '-')} iterations /
{fmt(pilot.get('env_steps'))} env steps, noise scale B_noise = {fmt(profile.get('noise', {}).get('b_noise'))}.

**Chosen configuration:** {chosen.get('actors')} actors x {chosen.get('memory_mb')} MB, batch {chosen.get('batch')}
({plan.get('message', '')}). Re-tuning: {'on' if rl['retune'] else 'off'}, {changes} change(s) during training.

**Result:** target {'reached' if achieved.get('reached') else '**not** reached'} after {fmt(achieved.get('env_steps'))} env steps
({achieved.get('stop_reason', '-')}); time on Lambda {fmt(achieved.get('lambda_time_s'))} s ({clock});
cost {fmt(achieved.get('cost_usd'))} USD ({achieved.get('cost_label', 'modelled')}); wall time on this machine
{fmt(achieved.get('wall_s'))} s (measured).
"""


_COMPARE_COLUMNS = ["row", "actors", "memory_mb", "batch", "time_s", "cost_usd", "label"]
_PHASE_COLUMNS = [
    "phase", "config", "iterations", "env_steps", "predicted_time_s", "measured_time_s", "predicted_cost_usd",
    "measured_cost_usd", "measured_wall_s",
]


def _front_row(row: str, cand: Any) -> dict[str, Any]:
    return {"row": row, **_shape(cand), "time_s": _get(cand, "predicted_time_s"), "cost_usd": _get(cand, "predicted_cost_usd"),
            "label": "modelled"}


def _compare_rows(plan: dict[str, Any], achieved: dict[str, Any], baselines: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Chosen, fastest and cheapest (predicted), achieved, and each baseline (trained)."""
    chosen = plan.get("config") or {}
    predicted = plan.get("predicted") or {}
    clock = achieved.get("lambda_time_label", "modelled")
    rows = [
        {"row": "chosen (predicted)", **chosen, "time_s": predicted.get("time_s"), "cost_usd": predicted.get("cost_usd"), "label": "modelled"},
        _front_row("fastest on the front (predicted)", plan.get("fastest")),
        _front_row("cheapest on the front (predicted)", plan.get("cheapest")),
        {"row": "achieved (training run)", **chosen, "time_s": achieved.get("lambda_time_s"), "cost_usd": achieved.get("cost_usd"),
         "label": f"Lambda clock {clock}; cost {achieved.get('cost_label', 'modelled')}"},
    ]
    for b in baselines:
        rows.append(
            {"row": f"baseline {b['baseline']} (trained, {'reached' if b.get('reached') else 'NOT reached'})", **(b.get("config") or {}),
             "time_s": b.get("lambda_time_s"), "cost_usd": b.get("cost_usd"), "label": b.get("label")}
        )
    return rows


def _phase_rows(trained: dict[str, Any]) -> list[dict[str, Any]]:
    return [
        {**{k: v for k, v in ph.items() if k not in ("config", "label")}, "config": _shape_text(ph.get("config"))}
        for ph in trained.get("phases") or []
    ]


def _shape(c: Any) -> dict[str, Any]:
    if not isinstance(c, dict):
        return {}
    s = c.get("shape", c)
    return {k: s.get(k) for k in ("actors", "memory_mb", "batch")}


def _shape_text(c: Any) -> str:
    if isinstance(c, dict):
        return f"{c.get('actors')}x{c.get('memory_mb')}MB b{c.get('batch')}"
    return str(c)


def _get(c: Any, key: str) -> Any:
    return c.get(key) if isinstance(c, dict) else None


def _versus(achieved: dict[str, Any], baselines: list[dict[str, Any]]) -> str:
    """One sentence per baseline: Seraph's cost and time as a share of the baseline's."""
    lines = []
    for b in baselines:
        if not (b.get("reached") and achieved.get("reached") and b.get("cost_usd") and b.get("lambda_time_s")):
            continue
        lines.append(
            f"Against the {b['baseline']} baseline Seraph's run cost {achieved['cost_usd'] / b['cost_usd']:.2f}x and took "
            f"{achieved['lambda_time_s'] / b['lambda_time_s']:.2f}x the time (both modelled on the local backend; "
            f"the tuned run does not count the pilot's cost)."
        )
    return "\n".join(lines) + ("\n" if lines else "")
