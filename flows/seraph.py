"""Seraph: the steps ``trainwise rl tune`` runs, as tasks: profile the RL workload (cached
under the profile's key) -> plan -> train on functions from exactly that plan, re-tuning as
it goes (and any baselines) -> record the run in the job's history -> report. With
``rl.seeds`` the flow runs ``rl sweep`` instead: each seed a run of the job, its arm chosen
from the job's history."""

from __future__ import annotations

from pathlib import Path

from prefect import flow, get_run_logger

from tasks.caching import call_cached
from tasks.report import BranchResult, RunResult, render_report
from tasks.rl import (
    plan_rl_configuration,
    profile_rl_workload,
    record_rl_run,
    render_seraph_section,
    render_sweep_section,
    sweep_rl_seeds,
    train_rl_baseline,
    train_rl_on_functions,
)
from core.paths import new_run_dir
from flows.params import workload_spec
from optimizers.seraph.job import SeraphJob
from optimizers.seraph.pilot import PilotOutcome, serves
from optimizers.spec import WorkloadSpec


def _profile(job: SeraphJob, out: Path, ttl_hours: float, refresh: bool) -> PilotOutcome:
    """The job's profile, as the CLI's ``profile`` step gets it (the pilot's checkpoint in
    this run's folder). A profile from Prefect's cache is another run's: reused, with no
    checkpoint here; one that does not serve this job's probe (another objective's stop)
    is measured again."""
    kwargs = {"job": job, "profile_key": job.profile_key, "checkpoint_dir": str(out / "seraph" / "checkpoint"),
              "reuse": not refresh}
    what = f"Seraph {job.workload.env_id}/{job.request.backend}"
    outcome, hit = call_cached(profile_rl_workload, what=what, ttl_hours=ttl_hours, refresh=refresh, **kwargs)
    pilot = PilotOutcome.from_dict(outcome)
    if not hit:
        return pilot
    if serves(pilot.profile, job.pilot, job.workload):
        return pilot.as_reused()
    outcome, _ = call_cached(profile_rl_workload, what=what, ttl_hours=ttl_hours, refresh=True, **kwargs)
    return PilotOutcome.from_dict(outcome)


@flow(name="seraph", log_prints=True)
def seraph(config: str = "configs/demo.yaml", workload: WorkloadSpec | None = None, run_dir: str | None = None,
           refresh_profiles: bool = False) -> RunResult | BranchResult:
    """Tune and train the workload's RL job (``workload`` if given, else the ``config`` file).
    Writes its own report when run alone; as a branch of ``optimize`` (``run_dir`` given)
    it returns its report section.

    Args:
        config: a workload YAML file with an ``rl:`` section, relative to the working
            directory (the project root, or the checkout a work pool's worker enters); used
            when ``workload`` is empty.
        workload: the workload itself, typed; this flow runs its ``rl`` section. Wins over
            ``config``.
        run_dir: the results folder; ``optimize`` sets it when this flow runs as its branch.
        refresh_profiles: measure the RL profile afresh even if a cached one is still valid.
    """
    spec, source = workload_spec(config, workload, need="rl")  # a bad workload fails here, before any task runs
    rl = spec.rl
    assert rl is not None
    out = Path(run_dir) if run_dir else new_run_dir("seraph")
    get_run_logger().info("seraph: %s to reward %s on the %s backend, objective %s", rl.env_id, rl.target_reward, rl.backend, rl.objective)

    seeds = rl.seed_list()
    if seeds is not None:  # a sweep: each seed a run of the job, its arm from the job's history
        swept = sweep_rl_seeds(rl.request(), seeds, progress_key=f"{spec.name}-seraph-progress")
        section = render_sweep_section(spec.name, swept, str(out))
    else:
        job = SeraphJob.of(rl.request())
        pilot = _profile(job, out, spec.cache.profile_ttl_hours, refresh_profiles)
        planned = plan_rl_configuration(job, pilot)
        trained = train_rl_on_functions(planned, progress_key=f"{spec.name}-seraph-progress")
        record_rl_run(job, trained)
        baselines = [train_rl_baseline(b, job) for b in rl.baselines]
        section = render_seraph_section(spec.name, planned, trained, str(out), baselines)

    if run_dir is not None:  # a branch of optimize: hand the section up
        return {"section": section, "run_dir": str(out)}
    return render_report(spec.name, f"trainwise seraph: {spec.name}", str(out), [section], config=source, extra={"flow": "seraph"})
