"""Seraph tasks: profile an RL workload, plan, train on functions, and the report section.
Thin wrappers over ``optimizers.seraph``'s steps, called with the arguments
``tune_and_train`` (the CLI's ``rl tune``) gives them: ``profile(job)`` -> ``plan(job,
profile)`` -> ``train(plan)``, on the :class:`~optimizers.seraph.job.SeraphJob` the flow
builds once.

The profile is the only step Prefect caches, under the profile's own key
(:attr:`~optimizers.seraph.workload_profile.Profile.key`, the key of Seraph's file cache:
workload, backend, hardware, profile version). Training resumes from the pilot's
checkpoint exactly when this flow run ran the pilot, as in the CLI; a profile from either
cache trains from a fresh policy. Planning is cheap and always re-run. Training is never
cached: it is the thing being measured.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from prefect import get_run_logger, task
from prefect.cache_policies import NO_CACHE, CachePolicy
from prefect.context import TaskRunContext

from tasks import timeouts
from tasks.measure import one_measurement_at_a_time
from tasks.progress import Progress, ReportingBackend
from tasks.report import ReportSection, fmt, md_table, section, table_artifact
from tasks.retry import EXTERNAL_RETRIES
from core.errors import UserError
from core.json_edge import JsonObject
from optimizers.seraph.job import SeraphJob
from optimizers.seraph.pilot import PilotOutcome
from optimizers.seraph.result import SeraphPlan, SeraphResult


@dataclass
class ProfileKey(CachePolicy):
    """Prefect's cache key for a profile task: the profile's own key (its ``profile_key`` input)."""

    def compute_key(
        self, task_ctx: TaskRunContext, inputs: dict[str, Any], flow_parameters: dict[str, Any], **kwargs: Any,
    ) -> str:
        return str(inputs["profile_key"])


@task(
    name="profile-rl-workload",
    cache_policy=ProfileKey(),
    result_serializer="json",
    persist_result=True,
    timeout_seconds=timeouts.PROFILE_RL_S,
    **EXTERNAL_RETRIES,
)
@one_measurement_at_a_time
def profile_rl_workload(job: SeraphJob, profile_key: str, checkpoint_dir: str, reuse: bool = True) -> JsonObject:
    """Seraph's ``profile`` step for the job, as ``rl tune`` calls it: the file cache when
    ``reuse``, else a pilot (short real training that probes memory sizes, concurrency and
    batch) whose final checkpoint goes to ``checkpoint_dir``. Returns the outcome as JSON;
    ``profile_key`` is the cache key (:attr:`SeraphJob.profile_key`)."""
    from optimizers import seraph

    pilot = seraph.profile(job, reuse=reuse, checkpoint_dir=Path(checkpoint_dir))
    prof = pilot.profile
    if prof.key != profile_key:
        raise RuntimeError(f"profile key {prof.key} is not the task's cache key {profile_key}")
    get_run_logger().info(
        "profile %s of %s on %s: %s, %d observations, %s pilot env steps", prof.key, job.workload.env_id,
        job.request.backend, "reused" if pilot.reused else "measured", len(prof.observations), prof.pilot.env_steps,
    )
    return pilot.to_dict()


@task(name="search-rl-configuration", cache_policy=NO_CACHE)
def plan_rl_configuration(job: SeraphJob, pilot: PilotOutcome) -> SeraphPlan:
    """Seraph's ``plan`` step: score every (actors, memory, batch) shape with the models
    fitted to the profile and pick one for the objective under the constraints."""
    from optimizers import seraph

    planned = seraph.plan(job, pilot)
    plan = planned.to_dict()
    get_run_logger().info("plan (%s): %s; predicted %s", plan["objective"], plan["config"], plan["predicted"])
    if not planned.feasible:
        raise UserError(f"Seraph found no configuration for this workload: {planned.message}")
    return planned


@task(name="train-rl-on-functions", cache_policy=NO_CACHE, timeout_seconds=timeouts.TRAIN_RL_S, **EXTERNAL_RETRIES)
@one_measurement_at_a_time
def train_rl_on_functions(planned: SeraphPlan, progress_key: str) -> SeraphResult:
    """Train to the target with PPO from exactly the planned shape, rollouts on the
    backend's functions, re-planning every few iterations. A progress artifact follows
    the run: the backend is wrapped so every batch of rollouts reports its env steps and
    finished episodes."""
    from optimizers import seraph

    request = planned.job.request
    progress = Progress(progress_key, f"Seraph: training {request.env_id} to {request.target_reward:g}")
    cap = planned.job.workload.max_steps
    target = float(request.target_reward)

    def on_batch(env_steps: int, mean_return: float | None) -> None:
        by_reward = mean_return / target if mean_return is not None and target > 0 else 0.0
        progress.update(
            min(max(by_reward, 0.0), 0.99),
            f"{env_steps:,} env steps of at most {cap:,}; mean return of the last 20 episodes {fmt(mean_return)} "
            f"(target {target:g})",
        )

    # the trainer puts the request's fault injector around it: the report sees the rollouts that ran
    backend = ReportingBackend(request.function_backend(), on_batch)
    try:
        result = seraph.train(planned, backend_obj=backend)
    finally:
        backend.close()
    achieved = result.achieved
    progress.done(
        f"{'reached' if achieved is not None and achieved.reached else 'did not reach'} {target:g} in "
        f"{0 if achieved is None else achieved.env_steps:,} env steps"
    )
    return result


@task(name="train-rl-baseline", timeout_seconds=timeouts.TRAIN_RL_S, **EXTERNAL_RETRIES)
@one_measurement_at_a_time
def train_rl_baseline(baseline: str, job: SeraphJob) -> JsonObject:
    """Train the same workload to the same target at a fixed baseline configuration
    (no profiling, no re-tuning), so the report compares Seraph with a real run."""
    from optimizers.rl_baselines.static import run_static

    if baseline != "static":
        raise UserError(f"unknown RL baseline {baseline!r}; allowed: static")
    request = job.request
    backend = request.function_backend(faults=job.faults)  # the same faults as Seraph's run
    try:
        out = run_static(job.workload, target_reward=request.target_reward, seed=request.seed, backend_obj=backend)
    finally:
        backend.close()
    get_run_logger().info("baseline %s: reached=%s in %s env steps", baseline, out.get("reached"), out.get("env_steps"))
    return {"baseline": baseline, **out}


@task(name="render-seraph-section", cache_policy=NO_CACHE)
def render_seraph_section(
    name: str,
    planned: SeraphPlan,
    result: SeraphResult,
    run_dir: str,
    baselines: list[JsonObject] | None = None,
) -> ReportSection:
    """Plots (reward vs time and cost, Pareto front), table artifacts, the markdown, and
    ``seraph/result.json``: the JSON ``trainwise rl tune --json-out`` writes."""
    from core.results import write_json

    rl, plan, trained = planned.job.request.to_dict(), planned.to_dict(), result.to_dict()
    profile, profile_cached = planned.pilot.profile.as_dict(), planned.pilot.reused
    write_json(Path(run_dir) / "seraph" / "result.json", trained)
    achieved = trained.get("achieved") or {}
    plots = _plots(rl, plan, trained, Path(run_dir) / "seraph")
    compare = _compare_rows(plan, achieved, baselines or [])
    phases = _phase_rows(trained)
    table_artifact(f"{name}-seraph-plan", [{c: r.get(c) for c in _COMPARE_COLUMNS} for r in compare], "Seraph: predicted vs achieved time (s) and cost (USD)")
    if phases:
        table_artifact(f"{name}-seraph-phases", [{c: p.get(c) for c in _PHASE_COLUMNS} for p in phases], "Seraph: phases of training (re-tuning): predicted vs measured")
    changes = [d for d in trained.get("decisions") or [] if d.get("changed")]
    price_warnings = "".join(f"\n> **Price table:** {w}\n" for w in planned.job.prices.warnings)
    md = _markdown(rl, plan, profile, achieved, profile_cached, len(changes)) + price_warnings + f"""
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


def _plots(rl: JsonObject, plan: JsonObject, trained: JsonObject, folder: Path) -> list[Any]:
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
    rl: JsonObject, plan: JsonObject, profile: JsonObject, achieved: JsonObject, profile_cached: bool,
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


def _front_row(row: str, cand: Any) -> JsonObject:
    return {"row": row, **_shape(cand), "time_s": _get(cand, "predicted_time_s"), "cost_usd": _get(cand, "predicted_cost_usd"),
            "label": "modelled"}


def _compare_rows(plan: JsonObject, achieved: JsonObject, baselines: list[JsonObject]) -> list[JsonObject]:
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


def _phase_rows(trained: JsonObject) -> list[JsonObject]:
    return [
        {**{k: v for k, v in ph.items() if k not in ("config", "label")}, "config": _shape_text(ph.get("config"))}
        for ph in trained.get("phases") or []
    ]


def _shape(c: Any) -> dict[str, int | None]:
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


def _versus(achieved: JsonObject, baselines: list[JsonObject]) -> str:
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


@task(name="record-rl-run", cache_policy=NO_CACHE)
def record_rl_run(job: SeraphJob, result: SeraphResult) -> str | None:
    """Record the trained run in its job's history (``TRAINWISE_HOME/history``), the evidence
    the job's next run decides from (:mod:`optimizers.seraph.history`)."""
    from optimizers.seraph.learning import record_tuned_run

    path = record_tuned_run(job, result, source="seraph flow")
    if path is not None:
        get_run_logger().info("run recorded in the job's history: %s", path)
    return None if path is None else str(path)


@task(name="sweep-rl-seeds", cache_policy=NO_CACHE)
@one_measurement_at_a_time
def sweep_rl_seeds(request: Any, seeds: tuple[int, ...], progress_key: str) -> JsonObject:
    """``rl sweep``: every seed trained as a run of the job, its arm chosen from the job's
    history; a progress artifact counts the seeds done."""
    from optimizers.seraph.sweep import sweep

    progress = Progress(progress_key, f"Seraph sweep: {request.env_id} to {request.target_reward:g}, {len(seeds)} seeds")
    done: list[int] = []

    def on_seed(run: Any) -> None:
        done.append(run.seed)
        progress.update(len(done) / len(seeds), f"seed {run.seed}: {run.arm}, reached={run.reached}")

    result = sweep(request, seeds, on_seed=on_seed).to_dict()
    progress.done(f"{result['total']['reached']} of {len(seeds)} seeds reached {request.target_reward:g}")
    return result


@task(name="render-sweep-section", cache_policy=NO_CACHE)
def render_sweep_section(name: str, sweep: JsonObject, run_dir: str) -> ReportSection:
    """The sweep's table (a row per seed: arm, reached, env steps, cost, time) and its whole bill."""
    from core.results import write_json

    write_json(Path(run_dir) / "seraph" / "sweep.json", sweep)
    rows = [{"seed": r["seed"], "arm": r["arm"], "reached": r["reached"], "env_steps": r["env_steps"],
             "cost_usd": fmt(r["cost_usd"]), "lambda_time_s": fmt(r["lambda_time_s"])} for r in sweep["runs"]]
    table_artifact(f"{name}-seraph-sweep", rows, "Seraph sweep: one run per seed, each arm chosen from the job's history")
    total = sweep["total"]
    md = (f"Job: {sweep['job']}. {total['reached']} of {total['seeds']} seeds reached the target; the sweep paid "
          f"${total['cost_usd']:.6f} ({total['cost_label']}), measured wall {total['wall_s']:.1f} s.\n\n"
          f"{md_table(rows, ['seed', 'arm', 'reached', 'env_steps', 'cost_usd', 'lambda_time_s'])}\n")
    return section("seraph", "Seraph sweep", md, summary={"total": total, "seeds": total["seeds"]})
