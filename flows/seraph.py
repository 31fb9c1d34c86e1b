"""Seraph: profile an RL workload (cached) -> plan -> train on functions from exactly that
plan, re-tuning as it goes (and any baselines) -> report."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from prefect import flow, get_run_logger

from tasks.caching import call_cached
from tasks.report import render_report
from tasks.rl import (
    plan_rl_configuration,
    profile_rl_workload,
    render_seraph_section,
    train_rl_baseline,
    train_rl_on_functions,
    workload_of,
)
from core.paths import new_run_dir
from optimizers.spec import load_spec


@flow(name="seraph", log_prints=True)
def seraph(config: str = "configs/demo.yaml", run_dir: str | None = None, refresh_profiles: bool = False) -> dict[str, Any]:
    """Tune and train the workload's RL job. Writes its own report when run alone;
    as a branch of ``optimize`` (``run_dir`` given) it returns its report section."""
    spec = load_spec(config, need="rl")  # a bad file fails here, before any task runs
    rl = spec.rl
    assert rl is not None
    out = Path(run_dir) if run_dir else new_run_dir("seraph")
    get_run_logger().info("seraph: %s to reward %s on the %s backend, objective %s", rl.env_id, rl.target_reward, rl.backend, rl.objective)

    profile, cached = call_cached(
        profile_rl_workload,
        what=f"Seraph {rl.env_id}/{rl.backend}",
        ttl_hours=spec.cache.profile_ttl_hours,
        refresh=refresh_profiles,
        workload=workload_of(rl),
        backend=rl.backend,
        seed=rl.seed,
    )
    request = rl.request()
    planned = plan_rl_configuration(profile, request)
    trained = train_rl_on_functions(planned, progress_key=f"{spec.name}-seraph-progress")
    baselines = [train_rl_baseline(b, request) for b in rl.baselines]
    section = render_seraph_section(spec.name, profile, planned, trained, cached, str(out), baselines)

    if run_dir is not None:  # a branch of optimize: hand the section up
        return {"section": section, "run_dir": str(out)}
    return render_report(spec.name, f"trainwise seraph: {spec.name}", str(out), [section], config=config, extra={"flow": "seraph"})
