"""`trainwise ingest cluster`: plan a multi-node ingestion pool for several training jobs (InTuneX).

    trainwise ingest cluster --jobs configs/cluster-demo.yaml --simulate --json-out cluster.json

Plans on the cluster model (``--simulate``): the node-level agent configures each node, the
cluster-level agent assigns nodes to jobs; the baselines are planned on the same model. The
result JSON has ``label``, ``all_fed``, ``throughput_per_usd``, ``usd_per_h``, ``assignment``
(per job: its nodes, each with ``instance_type`` and ``config``), ``baselines`` and ``tuning_s``.
``--write-tfvars FILE`` turns the plan into variables for ``infra/terraform/envs/dev``.

    trainwise ingest cluster --jobs configs/cluster-local.yaml --local-nodes 2 --json-out live.json

``--local-nodes N`` runs the plans live on N local nodes (one CPU each, tf.data service workers),
measures, refits the model and re-plans until the plan is stable, and runs the static and
Cachew-style baselines beside it (``optimizers.intunex.live``); that JSON is labelled ``measured``.
A job whose demand is ``measure`` runs its trainer against each plan; a starving trainer raises its
demand for the next round.
``--workers HOST:PORT,...`` does the same on nodes that run the node agent:

    trainwise ingest node-agent --listen 10.0.1.7:5040        # on each ingestion node
    trainwise ingest cluster --jobs configs/cluster-local.yaml --workers 10.0.1.7:5040,10.0.1.8:5040

The request's flags (``--jobs``, ``--instance-types``, ``--objective``, ``--budget-usd-per-h``,
``--baselines``, ``--static-type``, ``--seed``) are generated from
:class:`~optimizers.intunex.request.ClusterRequest`, which the ``intunex`` flow takes as its
parameter; the flags written here are the run's own (:data:`RUN_FLAGS`).
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

from core.errors import UserError
from core.json_edge import JsonObject

if TYPE_CHECKING:
    from optimizers.intunex.request import ClusterRequest


#: The flags of the run (how it is planned and where it is written), not of the request.
RUN_FLAGS = ("--what-if", "--plot", "--simulate", "--local-nodes", "--workers", "--dispatcher-ports", "--seconds",
             "--max-rounds", "--write-tfvars", "--json-out")


def register_cluster(isub: argparse._SubParsersAction) -> None:
    from optimizers.intunex.request import ClusterRequest
    from trainwise.cli import add_json_out, finite_float
    from trainwise.cli.model_flags import add_request_flags

    c = isub.add_parser("cluster", help="plan nodes and per-node configurations for several jobs (InTuneX)",
                        description="Assign nodes (how many of which instance type) to each training job and "
                        "split each node's CPUs between its pipeline's stages, for the best throughput per dollar.")
    add_request_flags(c, ClusterRequest)
    c.add_argument("--what-if", default=None, metavar="nodes=N,jobs=J[,types=T,seed=S]",
                   help="with --simulate: plan a cluster that does not exist (a seeded synthetic jobs file of J jobs on "
                   "N nodes of T types, or --jobs FILE when given without KEY=N: --what-if jobs), compare with every "
                   "baseline and the exact bound, and draw throughput per dollar against budget (--plot)")
    c.add_argument("--plot", type=Path, default=None, metavar="PNG",
                   help="with --what-if: where to draw the budget front (default what-if.png, or --json-out's name .png)")
    c.add_argument("--simulate", action="store_true", help="plan on the cluster model alone (no processes started)")
    c.add_argument("--local-nodes", type=int, default=None, metavar="N",
                   help="run the plan live on N local nodes (one CPU each, tf.data service workers), measure, "
                   "refit the model and re-plan until the plan is stable; jobs need real pipelines (dlrm-tsv)")
    c.add_argument("--workers", default=None, metavar="HOST:PORT,...",
                   help="run the plan live on nodes running the node agent (`trainwise ingest node-agent`), one "
                   "node per address; the dispatchers run here and the agents' workers register with them")
    c.add_argument("--dispatcher-ports", default="5050-5059", metavar="A-B",
                   help="with --workers: the ports the jobs' dispatchers listen on, which the nodes must reach "
                   "(default 5050-5059, inside the ec2_nodes module's data_service_ports)")
    c.add_argument("--seconds", type=finite_float, default=5.0, help="measuring window per reading in live runs (default 5)")
    c.add_argument("--max-rounds", type=int, default=4, help="most measure-refit-replan rounds in live runs (default 4)")
    c.add_argument("--write-tfvars", type=Path, default=None, metavar="FILE",
                   help="write the plan's node counts and types as Terraform variables (.tfvars or .tfvars.json)")
    add_json_out(c)
    c.set_defaults(handler=cluster_handler)
    register_node_agent(isub)


def register_node_agent(isub: argparse._SubParsersAction) -> None:
    from ingestion.cluster.agent import DEFAULT_PORT, DEFAULT_WORKER_PORTS, STALL_S, TOKEN_ENV, TOKEN_PARAMETER_ENV

    a = isub.add_parser("node-agent", help="serve an ingestion node: start tf.data service workers on request",
                        description="Run on each ingestion node; `ingest cluster --workers HOST:PORT,...` asks it to "
                        "start a worker per job, registered with that job's dispatcher (JSON over HTTP). Beyond "
                        f"loopback it needs a shared token: {TOKEN_ENV}, or {TOKEN_PARAMETER_ENV} naming an SSM "
                        "parameter that holds it (the same here and where trainwise runs). Bind it to a private "
                        "address only.")
    a.add_argument("--listen", default=f"127.0.0.1:{DEFAULT_PORT}", metavar="HOST:PORT",
                   help=f"address to bind (default 127.0.0.1:{DEFAULT_PORT}; on a node, its private IP)")
    a.add_argument("--cpus", default=None, help="CPUs the agent offers its workers, e.g. 0-3 or 0,2 (default: all)")
    a.add_argument("--worker-ports", default="-".join(map(str, DEFAULT_WORKER_PORTS)), metavar="A-B",
                   help="ports the workers listen on (default %(default)s)")
    a.add_argument("--advertise", default=None, metavar="HOST",
                   help="address the dispatcher and trainers reach the workers at (default: the address a request "
                   "reached the agent at)")
    a.add_argument("--dispatchers", default=None, metavar="CIDR,...",
                   help="the only dispatchers workers may register with, as CIDRs or addresses (default: loopback "
                   "and this node's own addresses; on AWS the VPC's CIDR)")
    a.add_argument("--stall-s", type=float, default=STALL_S, metavar="S",
                   help=f"drop a client that has not completed its request within S seconds (0 < S <= {STALL_S:g})")
    a.set_defaults(handler=node_agent_handler)


def node_agent_handler(args: argparse.Namespace) -> None:
    """Serve until interrupted; the workers end with the agent."""
    from ingestion.cluster.agent import Agent, agent_cpus, agent_token, parse_address, parse_dispatchers, parse_range
    from ingestion.cluster.agent_server import serve

    try:
        listen = parse_address(args.listen, "--listen")
        ports = parse_range(args.worker_ports, "--worker-ports")
    except ValueError as exc:
        raise UserError(str(exc)) from None
    try:
        if args.advertise is not None:
            parse_address(f"{args.advertise}:1", "--advertise")
    except ValueError:
        raise UserError(f"--advertise must be a host name or IPv4 address, got {args.advertise!r}") from None
    from ingestion.cluster.agent import STALL_S

    if not 0 < args.stall_s <= STALL_S:
        raise UserError(f"--stall-s must be > 0 and <= {STALL_S:g} seconds, got {args.stall_s:g}")
    token = agent_token()
    agent = Agent(agent_cpus(args.cpus), ports, args.advertise, parse_dispatchers(args.dispatchers))
    try:
        server = serve(listen, agent, token, args.stall_s)
    except OSError as exc:
        raise UserError(f"--listen {args.listen}: cannot bind ({exc.strerror or exc})") from None
    print(f"node agent on {server.address}: CPUs {list(agent.cpus)}, worker ports {ports[0]}-{ports[1]}, "
          f"dispatchers {', '.join(map(str, agent.dispatchers))}{', token required' if token else ''}",
          file=sys.stderr, flush=True)
    server.run()


def build_request(args: argparse.Namespace) -> "ClusterRequest":
    """The flags as a cluster request, checked; errors name the flag."""
    from optimizers.intunex.request import ClusterRequest
    from trainwise.cli.model_flags import request_from_flags

    return request_from_flags(ClusterRequest, args)


def cluster_handler(args: argparse.Namespace) -> JsonObject:
    request = build_request(args)
    if args.what_if is not None:
        return _what_if(args, request)
    if request.jobs is None:
        raise UserError("--jobs FILE is required (or --simulate --what-if nodes=N,jobs=J)")
    spec = request.load_jobs()
    types = request.types(spec)
    trainers = {j.name: j.trainer for j in spec.jobs if j.demand_rows_per_s == "measure"}
    spec, measured = _measured_demands(spec)
    if args.local_nodes is not None or args.workers is not None:
        return {**_live(args, request, spec, trainers), **measured}
    if not args.simulate:
        raise UserError("give --simulate (plan on the cluster model), --local-nodes N (run the plan on N local "
                        "tf.data service workers, measure and re-plan) or --workers HOST:PORT,... (the same on "
                        "node agents)")
    from optimizers.intunex.run import plan_cluster, tfvars_of, write_tfvars

    result = plan_cluster(spec, types, objective=request.objective, budget_usd_per_h=request.budget_usd_per_h,
                          baselines=request.baselines_for(live=False), static_type=request.static_type,
                          seed=request.seed, base_dir=request.jobs_file().parent)
    result["jobs_file"] = str(request.jobs)
    if args.write_tfvars is not None:
        result["tfvars"] = tfvars_of(result)
        write_tfvars(args.write_tfvars, result["tfvars"])
    _print_summary(result)
    return {**result, **measured}


def _measured_demands(spec: Any) -> tuple[Any, JsonObject]:
    """Jobs with ``demand_rows_per_s: measure``: their trainers' measured demands (``ingestion.cluster.trainer``)."""
    if not any(j.demand_rows_per_s == "measure" for j in spec.jobs):
        return spec, {}
    from ingestion.cluster.trainer import resolve_demands

    spec, measured = resolve_demands(spec)
    for job, d in measured.items():
        print(f"  {job}: demand {d.demand_rows_per_s:,.0f} rows/s measured from trainer {d.trainer} "
              f"(spread {d.spread:.1%}, margin {d.margin:.0%})", file=sys.stderr)
    return spec, {"measured_demand": {job: d.to_json() for job, d in measured.items()}}


def _what_if(args: argparse.Namespace, request: "ClusterRequest") -> JsonObject:
    """``--simulate --what-if``: plan a synthetic cluster (or --jobs FILE), with baselines, bound and budget front."""
    from optimizers.intunex.run import what_if
    from optimizers.intunex.whatif import parse_what_if, synthetic_spec

    if not args.simulate or args.local_nodes is not None or args.workers is not None:
        raise UserError("--what-if plans on the cluster model only: give it with --simulate (not --local-nodes or --workers)")
    if request.objective != "throughput-per-usd" or request.budget_usd_per_h is not None or args.write_tfvars is not None:
        raise UserError("--what-if sweeps the budget itself and plans throughput-per-usd; drop --objective, "
                        "--budget-usd-per-h and --write-tfvars")
    if "=" in args.what_if:
        if request.jobs is not None:
            raise UserError("--what-if nodes=N,jobs=J draws its own jobs; drop --jobs (or give --what-if jobs)")
        nodes, jobs, types, seed = parse_what_if(args.what_if)
        spec, title = synthetic_spec(nodes, jobs, types, seed), f"what-if seed {seed}"
    elif args.what_if.strip() == "jobs" and request.jobs is not None:
        spec, title = _measured_demands(request.load_jobs())[0], request.jobs_file().name
        if len(spec.jobs) > spec.pool.max_nodes:
            raise UserError(f"--what-if: more jobs ({len(spec.jobs)}) than nodes ({spec.pool.max_nodes}) in {request.jobs}")
    else:
        raise UserError(f"--what-if {args.what_if!r}: give nodes=N,jobs=J[,types=T,seed=S], or 'jobs' with --jobs FILE")
    plot = args.plot or (args.json_out.with_suffix(".png") if args.json_out else Path("what-if.png"))
    if plot.suffix.lower() != ".png":
        raise UserError(f"--plot must name a .png file, got {plot}")
    result = what_if(spec, request.types(spec), plot, baselines=request.baselines_for(live=False),
                     static_type=request.static_type, seed=request.seed, title=title,
                     base_dir=request.jobs_file().parent if request.jobs else None)
    result["what_if"] = args.what_if
    _print_summary(result)
    for p in result["budget_front"]:
        bound = p["bound_throughput_per_usd"]
        print(f"  budget ${p['budget_usd_per_h']:.2f}/h: InTuneX {p['plan_throughput_per_usd']:,.0f} rows per $ "
              f"(all fed: {p['plan_all_fed']}), bound {f'{bound:,.0f}' if bound else 'none'}", file=sys.stderr)
    print(f"  budget front drawn to {result['plot']}", file=sys.stderr)
    return result


def _nodes(args: argparse.Namespace) -> Any:
    """The live run's nodes: ``--local-nodes N`` or the node agents of ``--workers``."""
    from ingestion.cluster.agent import AgentNodes, parse_address, parse_range
    from ingestion.cluster.live import LocalNodes
    from optimizers.intunex.live import local_cpus

    if args.local_nodes is not None:
        if args.workers is not None:
            raise UserError("--local-nodes and --workers are two kinds of nodes; give one")
        return LocalNodes(tuple(tuple(c) for c in local_cpus(args.local_nodes)))
    addresses = [a.strip() for a in args.workers.split(",") if a.strip()]
    try:
        if not addresses:
            raise ValueError("--workers needs at least one node agent address HOST:PORT")
        for a in addresses:
            parse_address(a, "--workers")
        ports = parse_range(args.dispatcher_ports, "--dispatcher-ports")
    except ValueError as exc:
        raise UserError(str(exc)) from None
    if len(set(addresses)) != len(addresses):
        raise UserError(f"--workers names a node agent twice: {args.workers}")
    return AgentNodes.connect(addresses, ports)


def _live(args: argparse.Namespace, request: "ClusterRequest", spec: Any, trainers: dict[str, str]) -> JsonObject:
    """``--local-nodes N`` or ``--workers``: the live loop (``optimizers.intunex.live``); the jobs in
    ``trainers`` (those whose demand was measured) run their trainer against the plan each round."""
    from optimizers.intunex.live import run_live

    flag = "--local-nodes" if args.local_nodes is not None else "--workers"
    if args.simulate:
        raise UserError(f"{flag} runs the plan live; it does not go with --simulate (choose one)")
    for option, value, why in (
            ("--instance-types", request.instance_types, "live nodes are the given nodes, priced modelled by their CPUs"),
            ("--write-tfvars", args.write_tfvars, "live nodes already exist"),
            ("--static-type", request.static_type, "the static baseline runs on the live nodes' own type")):
        if value is not None:
            raise UserError(f"{option} does not apply to {flag} ({why})")
    if request.objective == "max-throughput" and request.budget_usd_per_h is None:
        raise UserError(f"--objective max-throughput needs --budget-usd-per-h with {flag} (the live nodes' modelled $/h)")
    if args.seconds <= 0 or args.max_rounds < 1:
        raise UserError(f"--seconds must be > 0 and --max-rounds >= 1, got {args.seconds:g} and {args.max_rounds}")
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")  # before TensorFlow loads: no per-dispatcher config dumps
    result = run_live(spec, _nodes(args), seconds=args.seconds, max_rounds=args.max_rounds, seed=request.seed,
                      base_dir=request.jobs_file().parent, objective=request.objective,
                      budget_usd_per_h=request.budget_usd_per_h, baselines=request.baselines_for(live=True),
                      trainers=trainers, progress=_progress)
    result["jobs_file"] = str(request.jobs)
    _print_live(result)
    return result


def _progress(message: str) -> None:
    print(f"[{time.strftime('%H:%M:%S')}] {message}", file=sys.stderr, flush=True)


def _print_live(result: JsonObject) -> None:
    last = result["rounds"][-1]
    print(f"InTuneX live ({result['label']}; prices modelled): {len(result['rounds'])} rounds, model error "
          f"{last['model_error']:.1%} in the last; {result['throughput_per_usd']:,.0f} rows per $, "
          f"${result['usd_per_h']:.4f}/h, all fed: {result['all_fed']}", file=sys.stderr)
    for job, j in result["jobs"].items():
        trainer = j.get("trainer")
        waits = (f"; its trainer waited {trainer['input_wait_share']:.1%} of its step time for input"
                 if trainer else "")
        print(f"  {job}: delivered {j['delivered_rows_per_s']:,.0f} of {j['demand_rows_per_s']:,.0f} rows/s "
              f"on {len(result['assignment'][job]['nodes'])} unit(s){waits}", file=sys.stderr)
    for name, b in result["baselines"].items():
        ratio = result["throughput_per_usd"] / b["throughput_per_usd"] if b["throughput_per_usd"] else float("inf")
        print(f"  vs {name} (measured): {ratio:.2f}x (its ${b['usd_per_h']:.4f}/h, all fed: {b['all_fed']})",
              file=sys.stderr)


def _print_summary(result: JsonObject) -> None:
    print(f"InTuneX ({result['label']}): {result['throughput_per_usd']:,.0f} rows per $, ${result['usd_per_h']:.3f}/h, "
          f"all fed: {result['all_fed']}, planned in {result['tuning_s']:.1f} s", file=sys.stderr)
    if result.get("gap_to_bound") is not None:
        bound = result["bound"]
        print(f"  gap to the exact bound (MILP on the same table, {'proven' if bound['proven_optimal'] else 'dual bound'}): "
              f"{result['gap_to_bound']:.2%}", file=sys.stderr)
    for job, a in result["assignment"].items():
        kinds: dict[str, int] = {}
        for n in a["nodes"]:
            key = n["instance_type"] + ("" if n["share"] == 1 else f" ({n['share']:g} node)")
            kinds[key] = kinds.get(key, 0) + 1
        print(f"  {job}: {', '.join(f'{v} x {k}' for k, v in kinds.items()) or 'no nodes'}", file=sys.stderr)
    for name, b in result["baselines"].items():
        ratio = result["throughput_per_usd"] / b["throughput_per_usd"] if b["throughput_per_usd"] else float("inf")
        print(f"  vs {name}: {ratio:.2f}x (its ${b['usd_per_h']:.3f}/h, all fed: {b['all_fed']})", file=sys.stderr)

