"""InTuneX in the loop on tf.data service workers: plan, run, measure, refit, re-plan.

    trainwise ingest cluster --jobs configs/cluster-local.yaml --local-nodes 2 --json-out live.json
    trainwise ingest cluster --jobs configs/cluster-local.yaml --workers 10.0.1.7:5040,10.0.1.8:5040 ...

Each of the ``--local-nodes`` nodes is one CPU of this machine; each ``--workers`` node is a
machine running the node agent (``ingestion.cluster.agent``), offering its CPUs (all agents the
same count). A node of k CPUs is priced as the share of a ``LOCAL_OF`` instance it stands for
(``ingestion.cluster.instances.local_type``; the price is modelled). A plan may give a job whole
nodes or halves (two worker processes time-sharing the node's CPUs).

1. InTuneX plans on the cluster model of the jobs' real pipelines (calibrated on one CPU).
2. **Round**: the plan runs (``ingestion.cluster.live``): each job's rows/s is measured where its
   trainer reads, as fast as it goes (capacity, in three windows whose spread is reported as
   ``capacity_spread``) and at its demand (delivered). A job whose demand was measured from its
   trainer (``trainers``) is read by that trainer instead, training on what the plan delivers: its
   steps/s, rows/s and input-wait share are measured. The round's ``model_error`` is the mean over
   the plan's jobs of |predicted - measured| / measured capacity.
3. A trainer that waited for its input more than ``STARVING_WAIT_SHARE`` of its step time is
   starving: its demand for the next round is raised to the rows/s it computes at with its
   batches always ready (measured in the round) times ``1 + margin`` (:func:`raised_demands`).
4. The model is refitted (:class:`Levels`): each job's pipeline is re-levelled to the
   inverse-variance weighted mean of what every round that ran it on the same units measured,
   each round weighted by its spread; InTuneX re-plans from the plan for the (raised) demands.
5. The loop stops when the same plan ran in two rounds in a row (so the last round measured the
   prediction of the model refitted to that very plan), the re-plan keeps it and no demand was
   raised in the last round; or after ``max_rounds``.
6. The baselines (``static`` and ``cachew`` unless named otherwise: tf.data AUTOTUNE inside, as
   ``baselines.py`` defines them; any other baseline runs its assignment's configurations) are
   planned on the refitted model for the last demands and run on the same nodes, measured the same
   way (the same trainers read their jobs).

Throughput per dollar is the measured delivered rows/s x 3,600 over the plan's modelled $/h: per
job, what its paced reader took (at most its demand) or, for a job with a trainer, every row the
trainer trained on. A job counts as fed when it is delivered >= ``FED_SHARE`` of its demand (the
paced reader takes at most the demand, so a fed job measures just under it); a job with a trainer
when its trainer is not starving (its own input wait is the evidence; its demand is an estimate).
"""

from __future__ import annotations

import os
import time
from dataclasses import replace
from typing import Any, Callable, Mapping, Sequence, TypedDict

from core.errors import UserError
from ingestion.cluster.instances import LOCAL_OF, by_name, local_type
from ingestion.cluster.jobs import JobsFile
from ingestion.cluster.live import JobReading, Nodes
from ingestion.cluster.model import ClusterModel, from_jobs_file
from ingestion.cluster.trainer import MARGIN, Step
from ingestion.knobs import Config
from optimizers.intunex.baselines import run_baselines
from optimizers.intunex.cluster_agent import LinearPolicy
from optimizers.intunex.names import LIVE_BASELINES
from optimizers.intunex.node_agent import NodeTable
from optimizers.intunex.planner import Plan, check_objective, plan_intunex, relevel, replan, slot_json

FED_SHARE = 0.95
#: A trainer that waits for its input more than this share of its step time is starving (not fed).
STARVING_WAIT_SHARE = 0.10
MAX_ROUNDS = 4
#: Baselines whose nodes run tf.data AUTOTUNE itself live; the others run their assignment's configurations.
AUTOTUNE_BASELINES = ("static", "cachew")
#: Runs a plan and returns each job's readings; ``autotune`` runs tf.data AUTOTUNE's configuration.
Runner = Callable[[Plan, bool], Mapping[str, JobReading]]


def plan_key(plan: Plan) -> tuple:
    """What makes two plans the same: per job, its units and their configurations."""
    return tuple(sorted((job, tuple(sorted((s.unit.label, tuple(sorted(s.config.items()))) for s in slots)))
                        for job, slots in plan.assignment.items()))


def starving(reading: JobReading) -> bool:
    """Whether the job's trainer ran and waited for its input more than ``STARVING_WAIT_SHARE`` of its step time."""
    return reading.trainer is not None and reading.trainer.input_wait_share > STARVING_WAIT_SHARE


def fed(reading: JobReading, demand: float) -> bool:
    """A job with a trainer is fed when the trainer is not starving (its own wait is the evidence; the
    demand is an estimate of what it consumes); any other job when it is delivered ``FED_SHARE`` of its demand."""
    if reading.trainer is not None:
        return not starving(reading)
    return reading.delivered_rows_per_s >= FED_SHARE * demand


def measured(plan: Plan, readings: Mapping[str, JobReading]) -> dict[str, Any]:
    """The plan's measured figures next to the model's, per job and in all. The rows counted for
    throughput per dollar are what each job's consumer took: the paced reader's, at most the demand,
    or the trainer's, all it trained on (a trainer takes no more than it can step through)."""
    jobs, errors, delivered = {}, [], 0.0
    for job, demand in plan.result.demand.items():
        r, predicted = readings[job], plan.result.supply[job]
        error = None
        if plan.assignment.get(job):
            m = r.capacity_rows_per_s
            error = abs(predicted - m) / m if m > 0 else 1.0
            errors.append(error)
        delivered += r.delivered_rows_per_s if r.trainer is not None else min(r.delivered_rows_per_s, demand)
        jobs[job] = {"demand_rows_per_s": demand, "delivered_rows_per_s": r.delivered_rows_per_s,
                     "delivered_share": r.delivered_rows_per_s / demand,
                     "fed": fed(r, demand), "planned_fed": plan.result.fed[job],
                     "capacity_rows_per_s": r.capacity_rows_per_s, "predicted_rows_per_s": predicted,
                     "capacity_windows": list(r.capacity_windows), "capacity_spread": r.capacity_spread,
                     "model_error": error}
        if r.trainer is not None:
            jobs[job]["trainer"] = {**r.trainer.to_json(), "starving": starving(r)}
    usd = plan.result.usd_per_h
    spreads = [j["capacity_spread"] for j in jobs.values() if j["capacity_spread"] is not None and j["model_error"] is not None]
    return {"label": "measured", "model_error": sum(errors) / len(errors) if errors else None,
            "capacity_spread": sum(spreads) / len(spreads) if spreads else None,
            "all_fed": all(j["fed"] for j in jobs.values()),
            "planned_fed_delivered": all(j["fed"] for j in jobs.values() if j["planned_fed"]),
            "delivered_rows_per_s": delivered, "usd_per_h": usd,
            "throughput_per_usd": delivered * 3600.0 / usd if usd > 0 else 0.0,
            "simulated": plan.result.summary(), "jobs": jobs,
            "assignment": {job: {"nodes": [slot_json(s) for s in slots]} for job, slots in plan.assignment.items()}}


#: The least relative spread a round's capacity is taken to have (a reading is never trusted more).
SPREAD_FLOOR = 0.02


class Levels:
    """Per job, the level of its rows/s over the calibrated model (``base``), estimated from every
    round that ran the job on the same units with the same configurations, each weighted by the
    inverse variance of its capacity (its windows' spread over their count, at least
    ``SPREAD_FLOOR``): a noisy round moves the estimate less than a steady one, and the refit is
    no longer the last figure alone. A job whose units change starts a new estimate."""

    def __init__(self, base: ClusterModel):
        self.base = base
        self.seen: dict[str, list[tuple[tuple, float, float]]] = {}

    def add(self, plan: Plan, jobs: Mapping[str, Any]) -> dict[str, float]:
        """Record a round's measured jobs; the combined level per job measured so far."""
        modelled = self.base.evaluate(plan.assignment).supply
        for job, j in jobs.items():
            if not plan.assignment.get(job) or modelled.get(job, 0) <= 0 or j["capacity_rows_per_s"] <= 0:
                continue
            key = tuple(sorted((s.unit.label, tuple(sorted(s.config.items()))) for s in plan.assignment[job]))
            ratio = j["capacity_rows_per_s"] / modelled[job]
            windows = max(1, len(j.get("capacity_windows") or ()))
            spread = max(j.get("capacity_spread") or 0.0, SPREAD_FLOOR)
            history = [h for h in self.seen.get(job, []) if h[0] == key]
            self.seen[job] = history + [(key, ratio, (spread * ratio) ** 2 / windows)]
        return {job: sum(r / v for _, r, v in h) / sum(1 / v for _, _, v in h) for job, h in self.seen.items()}

    def rounds(self) -> dict[str, int]:
        """How many rounds each job's level combines."""
        return {job: len(h) for job, h in self.seen.items()}


class DemandRaise(TypedDict):
    """A starving trainer's demand raised for the next round (measured figures)."""

    from_rows_per_s: float
    to_rows_per_s: float
    input_wait_share: float
    compute_rows_per_s: float
    margin: float


def raised_demands(plan: Plan, readings: Mapping[str, JobReading], margin: float = MARGIN) -> dict[str, DemandRaise]:
    """Per starving trainer, its demand for the next round: the rows/s it computes at with its batches
    always ready (measured in this round) times ``1 + margin``, where that is above its demand now."""
    out: dict[str, DemandRaise] = {}
    for job, demand in plan.result.demand.items():
        r = readings.get(job)
        if r is None or r.trainer is None or not starving(r):
            continue
        wanted = r.trainer.compute_rows_per_s * (1 + margin)
        if wanted > demand:
            out[job] = {"from_rows_per_s": demand, "to_rows_per_s": wanted, "margin": margin,
                        "input_wait_share": r.trainer.input_wait_share,
                        "compute_rows_per_s": r.trainer.compute_rows_per_s}
    return out


def with_demands(cluster: ClusterModel, demands: Mapping[str, float]) -> ClusterModel:
    """``cluster`` with the jobs in ``demands`` at those rows/s."""
    return replace(cluster, jobs=[replace(j, demand_rows_per_s=demands.get(j.name, j.demand_rows_per_s))
                                  for j in cluster.jobs])


def live_loop(cluster: ClusterModel, runner: Runner, policy: LinearPolicy, *, max_rounds: int = MAX_ROUNDS,
              seed: int = 0, baselines: tuple[str, ...] = LIVE_BASELINES, objective: str = "throughput-per-usd",
              margin: float = MARGIN, progress: Callable[[str], None] = lambda _m: None) -> dict[str, Any]:
    """Plan, run, refit and re-plan until the plan is stable; then run the baselines (module docstring)."""
    base = cluster
    plan = plan_intunex(cluster, NodeTable(cluster), policy, seed=seed, objective=objective)
    rounds: list[dict[str, Any]] = []
    levels = Levels(base)
    previous, stable = None, False
    for k in range(max_rounds):
        progress(f"round {k + 1}: running the plan")
        readings = runner(plan, False)
        rounds.append(measured(plan, readings))
        _report_trainers(plan, readings, k + 1, progress)
        raised = raised_demands(plan, readings, margin)
        if raised:  # a starving trainer: plan the next round for what it computes at
            base = with_demands(base, {job: r["to_rows_per_s"] for job, r in raised.items()})
        level = levels.add(plan, rounds[-1]["jobs"])
        cluster = relevel(base, level)
        new = replan(cluster, NodeTable(cluster), policy, plan, seed=seed, objective=objective)
        rounds[-1].update(refit={j: 1.0 / v for j, v in level.items()}, refit_rounds=levels.rounds(),
                          demand_raised=raised)
        key = plan_key(plan)
        rounds[-1]["replan_same"] = plan_key(new) == key
        stable = rounds[-1]["replan_same"] and previous == key and not raised
        if stable:
            break  # this plan ran twice, the second time on the model refitted to the first, and no trainer starved
        previous, plan = key, new
    out = {field: rounds[-1][field] for field in ("label", "all_fed", "planned_fed_delivered", "throughput_per_usd",
                                                   "usd_per_h", "delivered_rows_per_s", "jobs", "assignment")}
    out.update(rounds=rounds, stable=stable, objective=objective, baselines={},
               demand_rule={"starving_wait_share": STARVING_WAIT_SHARE, "margin": margin, "fed_share": FED_SHARE})
    for name, other in run_baselines(cluster, NodeTable(cluster), baselines).items():
        progress(f"baseline {name}: running its plan")
        autotune = name in AUTOTUNE_BASELINES
        live_config = ("tf.data AUTOTUNE (the assignment's configs are the model's version of it)" if autotune
                       else "each unit's configuration in the assignment")
        out["baselines"][name] = {**measured(other, runner(other, autotune)),
                                  "info": {**other.info, "live_config": live_config}}
    return out


def _report_trainers(plan: Plan, readings: Mapping[str, JobReading], round_no: int,
                     progress: Callable[[str], None]) -> None:
    for job, demand in plan.result.demand.items():
        t = readings[job].trainer
        if t is not None:
            progress(f"round {round_no}: {job}'s trainer {t.rows_per_s:,.0f} rows/s (computes at "
                     f"{t.compute_rows_per_s:,.0f}), input wait {t.input_wait_share:.1%}, demand {demand:,.0f}"
                     f"{' (starving)' if starving(readings[job]) else ''} (measured)")


def local_cluster(spec: JobsFile, nodes: int, base_dir: Any = None, cpus: int = 1) -> ClusterModel:
    """The cluster model of ``nodes`` nodes of ``cpus`` CPUs each (whole nodes and halves) for the jobs file."""
    from ingestion.cluster.pipelines import REAL_PIPELINES

    for i, job in enumerate(spec.jobs):
        if job.pipeline not in REAL_PIPELINES:
            raise UserError(f"jobs[{i}] ({job.name}): pipeline {job.pipeline!r} is simulated only; live runs need "
                            f"one of {', '.join(REAL_PIPELINES)} (see configs/cluster-local.yaml)")
    cluster = from_jobs_file(spec, [local_type(cpus)], base_dir=base_dir)
    return replace(cluster, max_nodes=nodes, fractions=(1.0, 0.5), min_unit_vcpus=0.5)


def local_cpus(nodes: int) -> list[list[int]]:
    """One CPU per local node; more nodes than CPUs is an error."""
    cpus = sorted(os.sched_getaffinity(0))
    if nodes < 1 or nodes > len(cpus):
        raise UserError(f"--local-nodes must be between 1 and {len(cpus)} (one CPU per node; this machine "
                        f"gives this process {len(cpus)} CPUs), got {nodes}")
    return [[c] for c in cpus[:nodes]]


def config_groups(plan: Plan) -> dict[str, list[tuple[str, Config, list[float]]]]:
    """Per job, its units grouped by configuration: (group name, configuration, unit shares). Each
    group runs as its own tf.data service, so every unit runs its own configuration; the job's
    trainer reads from all of its groups at once."""
    out: dict[str, list[tuple[str, Config, list[float]]]] = {}
    for job, slots in plan.assignment.items():
        groups: dict[tuple, list[float]] = {}
        for slot in slots:
            groups.setdefault(tuple(sorted(slot.config.items())), []).append(slot.unit.fraction)
        out[job] = [(job if len(groups) == 1 else f"{job}#{i}", dict(key), fractions)
                    for i, (key, fractions) in enumerate(groups.items())]
    return out


def node_runner(spec: JobsFile, nodes: Nodes, seconds: float, trainers: Mapping[str, Step] | None = None) -> Runner:
    """Runs plans on ``nodes`` with the jobs' real pipelines (``ingestion.cluster.live``): each group of
    a job's units with one configuration is a tf.data service of its own (:func:`config_groups`); the
    trainer paces each group at its share of the measured capacity of the job's demand, and a job's
    readings are the sums over its groups. A job in ``trainers`` (its step function) is read by that
    trainer, training on all of its groups at once, instead of the paced reader."""
    from ingestion.cluster.live import place, run_on_nodes
    from ingestion.cluster.pipelines import real_pipeline
    from optimizers.baselines.autotune import autotune_config

    specs = {job.name: real_pipeline(job.pipeline).spec for job in spec.jobs}
    demand = {job.name: job.demand_rows_per_s for job in spec.jobs}

    def run(plan: Plan, autotune: bool) -> Mapping[str, JobReading]:
        datasets, shares, owner = {}, {}, {}
        for job, groups in config_groups(plan).items():
            if autotune and groups:  # tf.data AUTOTUNE on every unit: one graph, one service
                groups = [(job, autotune_config(specs[job]), [f for g in groups for f in g[2]])]
            for name, config, fractions in groups:
                datasets[name] = specs[job].build(config).repeat()
                shares[name], owner[name] = fractions, job
        running = {job: step for job, step in (trainers or {}).items() if job in owner.values()}
        readings = run_on_nodes(datasets, place(shares, nodes.count), nodes, demand, seconds=seconds, owner=owner,
                                trainers=running)
        out = {job: JobReading(0.0, 0.0) for job in demand}
        for name, r in readings.items():
            before = out[owner[name]]
            windows = r.capacity_windows if not before.capacity_windows else tuple(
                a + b for a, b in zip(before.capacity_windows, r.capacity_windows))
            out[owner[name]] = JobReading(before.capacity_rows_per_s + r.capacity_rows_per_s,
                                          before.delivered_rows_per_s + r.delivered_rows_per_s, windows, r.trainer)
        return out

    return run


def node_size(cpus: Sequence[Sequence[int]]) -> int:
    """The nodes' common CPU count; nodes of different sizes are a UserError."""
    sizes = sorted({len(c) for c in cpus})
    if len(sizes) != 1:
        raise UserError(f"the nodes offer different CPU counts {sizes}; a live pool needs nodes of one size "
                        "(give each node agent the same number of --cpus)")
    return sizes[0]


def run_live(spec: JobsFile, nodes: Nodes, *, seconds: float, max_rounds: int = MAX_ROUNDS, seed: int = 0,
             base_dir: Any = None, objective: str = "throughput-per-usd", baselines: tuple[str, ...] = LIVE_BASELINES,
             budget_usd_per_h: float | None = None, trainers: Mapping[str, str] | None = None,
             progress: Callable[[str], None] = lambda _m: None) -> dict[str, Any]:
    """The live loop on ``nodes`` (local or node agents) for the jobs file; the result dict ``--json-out``
    writes. ``trainers`` names, per job, the trainer (``dlrm`` or ``module:function``) that runs against
    the plan each round and reads the job's rows (the jobs whose demand was ``measure``)."""
    from ingestion.cluster.trainer import load_trainer
    from optimizers.intunex.policies import cluster_policy

    started = time.monotonic()
    cpus = node_size(nodes.describe()["cpus"])
    cluster = local_cluster(spec, nodes.count, base_dir, cpus)
    if budget_usd_per_h is not None:
        cluster = replace(cluster, budget_usd_per_h=budget_usd_per_h)
    check_objective(cluster, objective)
    unit = local_type(cpus)
    steps = {job: load_trainer(name) for job, name in (trainers or {}).items()}  # a model of its own per job
    out = live_loop(cluster, node_runner(spec, nodes, seconds, steps), cluster_policy(), max_rounds=max_rounds,
                    seed=seed, objective=objective, baselines=baselines, progress=progress)
    out.update(nodes={**nodes.describe(), "instance_type": unit.name,
                      "stands_for": f"{unit.vcpus} of the {by_name(LOCAL_OF).vcpus} vCPUs of a {LOCAL_OF}",
                      "usd_per_h": unit.usd_per_hour, "price_label": "modelled"},
               trainers=dict(trainers or {}), window_s=seconds, run_s=round(time.monotonic() - started, 1),
               loadavg=list(os.getloadavg()))
    return out
