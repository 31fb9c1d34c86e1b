"""A model of an ingestion pipeline on one node: throughput, memory and out-of-memory.

The model is deliberately small, so an RL agent can take millions of steps on it and so its
parameters can be calibrated from a short profile of the real pipeline
(:mod:`ingestion.calibrate`). The node (vCPUs, RAM, price) is always a parameter, which is how we
evaluate 8-, 32-, 64- and 96-vCPU nodes on a 2-core machine.

Stages and units
----------------
A pipeline is a chain of stages. Stage ``i`` spends ``cpu_s`` CPU-seconds and ``wait_s`` non-CPU
seconds (I/O latency, sleeping) per *row*, each split into a per-row part and a per-call part
that is amortised over the rows of one element (a batch, for stages after batching). A stage
runs ``n_i`` threads: the value of its ``cpu`` knob, or one thread if it has none (a sequential
stage such as ``batch`` or the consumer).

Processor sharing
-----------------
Each thread alternates between a CPU phase and a wait phase and idles when its output buffer is
full. With ``C`` cores and ``R`` threads runnable at once, every runnable thread gets
``phi = min(1, C / R)`` of a core (processor sharing). The steady state is a fixed point:
throughput ``X = min_i n_i / (c_i / phi + w_i)`` and ``R = sum_i n_i * rho_i`` where ``rho_i =
min(1, X c_i / (phi n_i))`` is the share of time stage ``i``'s threads spend runnable. It is
solved by damped iteration. Below the core count this is the classic bottleneck model; above it,
stages compete for cores, and at the fixed point the total CPU demand ``X sum c_i`` never exceeds
``C``. Oversubscription costs context switches: throughput is multiplied by
``1 / (1 + overhead * max(0, threads / C - 1))``. Busy cores also slow each other (shared
caches and memory bandwidth): with ``busy = X * sum_i c_i`` cores' worth of CPU work, throughput
is multiplied by ``1 / (1 + core_contention * max(0, busy - 1) / (C - 1))`` (0 by default; the
real pipeline's calibration fits it).

Runners fetch their input
-------------------------
Stages without threads of their own run inline in the thread that pulls from them. When that
puller is a parallel stage, it is the stage's runner thread that runs them, once per element,
and that fetch counts as one of the stage's ``n`` calls in flight (tf.data's parallel map). So
each of the ``n`` slots is busy for the fetch plus the call: a parallel stage with one thread is
serial with its inline input, and two threads overlap them.

Helper CPU
----------
A stage's own thread is not always all of its CPU: an op may shard its work over TensorFlow's
intra-op threads (``parse_example`` on a batch does, on this machine: the TFRecord pipeline's
single-thread configuration keeps 1.3 cores busy, measured), so the stage's thread waits
``cpu_s`` per row while ``helper_cpu_s`` more CPU per row runs on other threads meanwhile. When
cores are free the helpers cost no time; they do compete for the cores: they count as runnable
work in the processor sharing (``X * sum helper / phi`` threads' worth), the CPU demand at the
fixed point, ``X * (sum cpu_s + sum helper_cpu_s)``, is capped at ``C``, and the busy cores of the
contention factor include them. With no helper CPU (the default) nothing changes.

Buffers and memory
------------------
Arrival of work is bursty; a buffer of ``b`` elements smooths it, modelled as a throughput factor
``1 - burstiness / (1 + b)`` per buffer knob. Memory is a base footprint plus every element held:
one in flight per thread of each stage and ``b`` per buffer, each of ``rows_per_element *
bytes_per_row`` bytes. Over the node's RAM budget the pipeline is out of memory (it crashes:
throughput 0, ``failed=True``).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Literal, Mapping

import numpy as np

from core.json_edge import JsonObject
from ingestion.knobs import Knob, KnobSpace
from ingestion.node import Node
from ingestion.measurement import Config, Measurement, SimulatedStage

PipelineKind = Literal["read", "parse", "transform"]
PIPELINE_KINDS: tuple[PipelineKind, ...] = ("read", "parse", "transform")


@dataclass(frozen=True)
class StageModel:
    """One stage: its costs per row and per call, its output size and its knobs."""

    name: str
    cpu_s_per_row: float
    cpu_s_per_call: float = 0.0
    wait_s_per_row: float = 0.0
    bytes_per_row: float = 0.0
    threads_knob: str | None = None
    buffer_knob: str | None = None
    batched: bool = False
    # Effect of knobs the model does not understand structurally ("other" kind): a factor on
    # this stage's CPU cost per knob value, fitted by calibration. Empty means no effect.
    cost_factors: Mapping[str, Mapping[int, float]] = field(default_factory=dict)
    # Extra CPU seconds per row this stage costs at a knob value (e.g. a bigger shuffle buffer
    # missing caches), measured by calibration against the knob's default. Empty means none.
    cost_deltas: Mapping[str, Mapping[int, float]] = field(default_factory=dict)
    # Extra CPU seconds per element when the stage runs on threads of its own (tf.data's
    # hand-off through a buffer and thread synchronisation); large for per-row elements.
    async_cpu_s_per_call: float = 0.0
    # A knob that caps this stage's threads (tf.data's interleave runs at most
    # ``cycle_length`` files at once, whatever its ``num_parallel_calls``). None: no cap.
    threads_cap_knob: str | None = None
    # CPU seconds per row the stage spends on other threads while its own thread runs (ops that
    # shard their work over the intra-op threads), measured by calibration from the cores the
    # single-thread prefixes keep busy. They compete for cores but do not lengthen the stage's
    # own time while a core is free (module doc, "Helper CPU").
    helper_cpu_s_per_row: float = 0.0


@dataclass(frozen=True)
class PipelineModel:
    """A pipeline as the simulator sees it. ``source`` says where the numbers came from."""

    name: str
    stages: tuple[StageModel, ...]
    batch_knob: str | None = None
    default_batch: int = 1
    base_mb: float = 200.0
    burstiness: float = 0.2
    oversub_overhead: float = 0.05
    source: str = "synthetic"
    core_contention: float = 0.0

    def stage(self, name: str) -> StageModel:
        for s in self.stages:
            if s.name == name:
                return s
        raise KeyError(name)

    def to_json(self) -> JsonObject:
        return {
            "name": self.name,
            "stages": [
                {
                    **s.__dict__,
                    "cost_factors": {k: {str(v): f for v, f in d.items()} for k, d in s.cost_factors.items()},
                    "cost_deltas": {k: {str(v): f for v, f in d.items()} for k, d in s.cost_deltas.items()},
                }
                for s in self.stages
            ],
            "batch_knob": self.batch_knob,
            "default_batch": self.default_batch,
            "base_mb": self.base_mb,
            "burstiness": self.burstiness,
            "oversub_overhead": self.oversub_overhead,
            "source": self.source,
            "core_contention": self.core_contention,
        }

    @classmethod
    def from_json(cls, data: JsonObject) -> "PipelineModel":
        stages = tuple(
            StageModel(
                **{
                    **s,
                    "cost_factors": {k: {int(v): float(f) for v, f in d.items()} for k, d in s.get("cost_factors", {}).items()},
                    "cost_deltas": {k: {int(v): float(f) for v, f in d.items()} for k, d in s.get("cost_deltas", {}).items()},
                }
            )
            for s in data["stages"]
        )
        return cls(**{**data, "stages": stages})


def _rows_per_element(model: PipelineModel, stage: StageModel, config: Mapping[str, int]) -> int:
    if not stage.batched:
        return 1
    return int(config.get(model.batch_knob, model.default_batch)) if model.batch_knob else model.default_batch


def stage_threads(stage: StageModel, config: Mapping[str, int]) -> float:
    """Threads the stage runs on in ``config`` (0 = inline), after its cap knob if any."""
    if not stage.threads_knob:
        return 0.0
    threads = float(config[stage.threads_knob])
    if stage.threads_cap_knob and stage.threads_cap_knob in config and threads > 0:
        threads = min(threads, max(1.0, float(config[stage.threads_cap_knob])))
    return threads


def stage_costs(model: PipelineModel, config: Mapping[str, int]) -> tuple[list[float], list[float], list[float], list[int]]:
    """Per stage: CPU s/row, wait s/row, threads (0 = inline/sequential) and rows per element."""
    c, w, n, rows = [], [], [], []
    for s in model.stages:
        r = _rows_per_element(model, s, config)
        factor = 1.0
        for knob, table in s.cost_factors.items():
            if knob in config:
                factor *= table.get(int(config[knob]), 1.0)
        threads = stage_threads(s, config)
        cost = factor * (s.cpu_s_per_row + s.cpu_s_per_call / r)
        for knob, table in s.cost_deltas.items():
            if knob in config:
                cost += table.get(int(config[knob]), 0.0)
        if threads > 0:
            cost += s.async_cpu_s_per_call / r
        c.append(max(cost, 1e-12))
        w.append(s.wait_s_per_row)
        n.append(threads)
        rows.append(r)
    return c, w, n, rows


@dataclass
class Server:
    """What runs on threads of its own: a parallel stage, or a run of sequential stages.

    ``feeder``: index of the run of inline stages that this parallel stage's runner thread
    executes to fetch each input (None if its input comes from another server's buffer).
    """

    stages: list[int]
    cpu_s: float
    wait_s: float
    threads: float
    feeder: int | None = None
    helper_s: float = 0.0


def servers(model: PipelineModel, config: Mapping[str, int]) -> list[Server]:
    """Group stages the way tf.data runs them.

    A stage with threads > 0 is a server of its own with that many threads. Stages without a
    thread knob (shuffle, batch, prefetch) or with 0 threads (tf.data's sequential
    ``num_parallel_calls=None``) run inline in the single thread that pulls from them (the
    next asynchronous stage's runner, or the consumer), so each maximal run of them is one
    single-thread server whose cost is the sum of its stages' costs.

    When that puller is a parallel stage, its runner thread fetches each input itself (the
    run's work) before it hands the call to a pool thread, and the fetch counts as one of the
    stage's ``n`` calls in flight (tf.data's ``ParallelMapDataset`` increments its call count
    before ``GetNext`` on its input). So the parallel stage's server records the run as its
    ``feeder``: each of its ``n`` slots is busy for the fetch plus the call, and the run
    itself is one thread (the runner). With one thread the fetch and the call are serial.
    """
    c, w, n, _ = stage_costs(model, config)
    out: list[Server] = []
    run: Server | None = None
    for i in range(len(model.stages)):
        helper = model.stages[i].helper_cpu_s_per_row
        if n[i] > 0:
            feeder = None
            if run is not None:
                out.append(run)
                feeder = len(out) - 1
                run = None
            out.append(Server([i], c[i], w[i], n[i], feeder, helper))
        elif run is None:
            run = Server([i], c[i], w[i], 1.0, helper_s=helper)
        else:
            run.stages.append(i)
            run.cpu_s += c[i]
            run.wait_s += w[i]
            run.helper_s += helper
    if run is not None:
        out.append(run)
    return out


def processor_sharing_throughput(
    cpu_s: list[float], wait_s: list[float], threads: list[float], cores: float, iterations: int = 60,
    feeders: list[int | None] | None = None, helper_s: list[float] | None = None,
) -> tuple[float, list[float], list[float], float]:
    """Solve the processor-sharing fixed point; return (rows/s, per-server capacity, utilisation, phi).

    ``feeders[i]`` (optional) is the server whose work each of server ``i``'s threads also
    waits for per element (a parallel stage's runner fetching its input; see :func:`servers`);
    it comes before server ``i``. ``helper_s[i]`` (optional) is server ``i``'s CPU per row on
    other threads (module doc, "Helper CPU"): runnable work that competes for the cores, within
    the CPU cap.

    Each iteration is two passes over the servers (capacities, then the runnable shares, damped),
    every figure computed with the operations of the module doc in a fixed order.
    """
    k = len(cpu_s)
    feeders = feeders or [None] * k
    if any(f is not None and not 0 <= f < i for i, f in enumerate(feeders)):
        raise ValueError(f"feeders {feeders}: each feeder must be a server before the one it feeds")
    helper = sum(helper_s) if helper_s else 0.0
    # with helper CPU the demand X * (cpu + helper) must fit the cores (without it the fixed point
    # keeps X * cpu within them by itself, and the cap is left out so nothing else changes)
    cpu_cap = cores / (sum(cpu_s) + helper) if helper > 0 else math.inf
    rows = list(zip(range(k), cpu_s, wait_s, threads, feeders))
    rho, busy, caps = [1.0] * k, [0.0] * k, [0.0] * k
    x, phi = 0.0, 1.0
    runnable = sum(n * r for n, r in zip(threads, rho))
    for _ in range(iterations):
        if helper > 0:
            runnable += x * helper / phi
        phi = min(1.0, cores / runnable) if runnable > 0 else 1.0
        low = math.inf
        for i, c, w, n, f in rows:
            b = busy[i] = c / phi + w  # seconds per row of one thread
            t = b + busy[f] if f is not None else b  # a runner also fetches its input
            cap = caps[i] = n / t if t > 0 else math.inf
            if i == 0 or cap < low:
                low = cap
        x_new = cpu_cap if cpu_cap < low else low
        settled = abs(x_new - x) <= 1e-9 * max(x_new, 1.0)
        worst, runnable = 0.0, 0.0
        for i, c, _, n, _ in rows:
            r = x_new * c / (phi * n)  # the share of time the stage's threads are runnable
            r = r if r < 1.0 else 1.0
            d = abs(rho[i] - r)
            if i == 0 or d > worst:
                worst = d
            rho[i] = 0.5 * rho[i] + 0.5 * r
            runnable += n * rho[i]
        x = x_new
        if settled and worst < 1e-7:
            break
    util = [x / cap if cap > 0 and math.isfinite(cap) else 0.0 for cap in caps]
    return x, caps, util, phi


#: Solutions of :func:`solve_servers` by their inputs (a pure function; configurations that
#: differ only in buffer sizes, or a capacity read again for an observation, share one). Bounded:
#: the hits come from the configurations of one search, which sit close together.
_SOLVED: dict[tuple, tuple[float, tuple[float, ...], tuple[float, ...], float]] = {}
SOLVED_MAX = 4096


def solve_servers(group: list[Server], cores: float) -> tuple[float, list[float], list[float], float]:
    """:func:`processor_sharing_throughput` of the servers :func:`servers` returned (memoised)."""
    key = (cores, tuple((g.cpu_s, g.wait_s, g.threads, g.feeder, g.helper_s) for g in group))
    hit = _SOLVED.get(key)
    if hit is None:
        x, caps, util, phi = processor_sharing_throughput(
            [g.cpu_s for g in group], [g.wait_s for g in group], [g.threads for g in group], cores,
            feeders=[g.feeder for g in group], helper_s=[g.helper_s for g in group])
        if len(_SOLVED) >= SOLVED_MAX:
            _SOLVED.clear()
        hit = _SOLVED[key] = (x, tuple(caps), tuple(util), phi)
    return hit[0], list(hit[1]), list(hit[2]), hit[3]


def memory_mb(model: PipelineModel, config: Mapping[str, int]) -> tuple[float, list[float]]:
    """Modelled resident memory: base plus every element held in flight or in a buffer."""
    per_stage = []
    for s in model.stages:
        elem_mb = _rows_per_element(model, s, config) * s.bytes_per_row / 2**20
        held = max(1.0, stage_threads(s, config)) + (
            float(config[s.buffer_knob]) if s.buffer_knob else 0.0
        )
        per_stage.append(held * elem_mb)
    return model.base_mb + sum(per_stage), per_stage


def simulate(
    model: PipelineModel,
    config: Mapping[str, int],
    node: Node,
    *,
    noise: float = 0.0,
    rng: np.random.Generator | None = None,
) -> Measurement:
    """Throughput and memory of ``config`` on ``node``; labelled "simulated".

    ``noise`` adds multiplicative log-normal noise (standard deviation ``noise``) to the
    throughput, to train agents that tolerate noisy live measurements.
    """
    mem, mem_stages = memory_mb(model, config)
    group = servers(model, config)
    x, caps, util, phi = solve_servers(group, float(node.vcpus))
    # Threads that can run at once: a parallel stage's runner fetching its input is one of the
    # stage's own calls in flight, so a feeder run adds no thread of its own.
    feeding = {g.feeder for g in group if g.feeder is not None}
    total_threads = sum(g.threads for gi, g in enumerate(group) if gi not in feeding)
    x *= 1.0 / (1.0 + model.oversub_overhead * max(0.0, total_threads / node.vcpus - 1.0))
    # Busy cores slow each other (shared caches and memory bandwidth; vCPUs sharing a host):
    # with `busy` cores' worth of CPU work per second, beyond one core the CPU work costs more.
    busy = x * sum(g.cpu_s + g.helper_s for g in group)
    x *= 1.0 / (1.0 + model.core_contention * max(0.0, busy - 1.0) / max(1.0, node.vcpus - 1.0))
    for s in model.stages:
        if s.buffer_knob:
            x *= 1.0 - model.burstiness / (1.0 + float(config[s.buffer_knob]))
    if noise > 0:
        x *= float(np.exp((rng or np.random.default_rng()).normal(0.0, noise)))
    oom = mem > node.ram_budget_mb
    stages: dict[str, SimulatedStage] = {}
    for gi, g in enumerate(group):
        for i in g.stages:
            stages[model.stages[i].name] = {
                "threads": g.threads if len(g.stages) == 1 else 0.0,
                "server": "+".join(model.stages[j].name for j in g.stages),
                "capacity_rows_per_s": caps[gi],
                "utilisation": util[gi],
                "memory_mb": mem_stages[i],
            }
    bottleneck = "+".join(model.stages[j].name for j in group[int(np.argmin(caps))].stages)
    return Measurement(
        rows_per_s=0.0 if oom else x,
        peak_rss_mb=mem,
        failed=oom,
        label="simulated",
        extra={
            "stages": stages,
            "bottleneck": bottleneck,
            "memory_fraction": mem / node.ram_budget_mb,
            "cpu_share_per_thread": phi,
            "model": model.name,
            "node": node.name,
        },
    )


def simulated_oracle(model: PipelineModel, space: KnobSpace, node: Node) -> tuple[Config, Measurement, int]:
    """The best configuration of the whole grid on the simulator (exhaustive search)."""
    best: tuple[Config, Measurement] | None = None
    count = 0
    for config in space.grid():
        count += 1
        m = simulate(model, config, node)
        if best is None or m.score > best[1].score:
            best = (config, m)
    assert best is not None
    return best[0], best[1], count


# -- nodes and random pipelines ---------------------------------------------------------------

#: Compute-optimised nodes (2 GiB per vCPU) used for simulated evaluation. Prices are a modelled
#: figure (about $0.0425 per vCPU-hour, in the range of on-demand compute-optimised instances).
SIM_NODES: dict[int, Node] = {
    v: Node(name=f"sim-{v}vcpu", vcpus=v, ram_gib=2.0 * v, hourly_usd=round(0.0425 * v, 4)) for v in (8, 32, 64, 96)
}


def cpu_values(budget: int, steps: int = 16) -> tuple[int, ...]:
    """Thread counts for one stage on a budget: 1 and multiples of ``budget // steps``."""
    unit = max(1, budget // steps)
    return tuple(sorted({1, *range(unit, budget + 1, unit)}))


BATCH_VALUES = (256, 512, 1024, 2048, 4096, 8192)
PREFETCH_VALUES = (0, 1, 2, 4, 8, 16, 32, 64)


def dlrm_like_space(node: Node, name: str = "synthetic-dlrm") -> KnobSpace:
    """The knob space of the synthetic DLRM-like pipelines: read -> batch -> parse -> transform -> prefetch."""
    cpu = cpu_values(node.vcpus)
    return KnobSpace(
        knobs=(
            Knob("read_threads", cpu, kind="cpu", stage="read", default=1),
            Knob("batch_size", BATCH_VALUES, kind="batch", stage="batch", default=1024),
            Knob("parse_threads", cpu, kind="cpu", stage="parse", default=1),
            Knob("transform_threads", cpu, kind="cpu", stage="transform", default=1),
            Knob("prefetch", PREFETCH_VALUES, kind="buffer", stage="prefetch", default=2),
        ),
        cpu_budget=node.vcpus,
        name=name,
    )


def random_pipeline(rng: np.random.Generator, kind: PipelineKind, name: str | None = None) -> PipelineModel:
    """A random DLRM-like pipeline whose bottleneck (for a balanced allocation) is ``kind``.

    Costs are drawn around Criteo-like magnitudes: reading text rows is mostly I/O wait,
    parsing costs a few microseconds per row plus a per-batch call overhead, and the
    transform expands rows (hashing, bucketising, multi-hot features) so its output is large,
    which is what makes big batches times many buffers run out of memory.
    """
    u = lambda lo, hi: float(np.exp(rng.uniform(np.log(lo), np.log(hi))))  # noqa: E731  log-uniform
    read_cpu, read_wait = u(0.3e-6, 1.0e-6), u(1e-6, 4e-6)
    parse_cpu, parse_call = u(1e-6, 3e-6), u(50e-6, 400e-6)
    tf_cpu, tf_call = u(1e-6, 3e-6), u(50e-6, 400e-6)
    tf_bytes = u(16_000, 128_000)
    heavy = u(3.0, 8.0)
    if kind == "read":
        read_wait *= heavy * 2
        read_cpu *= 2
    elif kind == "parse":
        parse_cpu *= heavy
    else:
        tf_cpu *= heavy
    return PipelineModel(
        name=name or f"{kind}-bound",
        stages=(
            StageModel("read", read_cpu, 0.0, read_wait, u(150, 400), threads_knob="read_threads"),
            StageModel("batch", u(0.02e-6, 0.08e-6), u(5e-6, 20e-6), 0.0, u(150, 400), batched=True),
            StageModel("parse", parse_cpu, parse_call, 0.0, u(200, 600), threads_knob="parse_threads", batched=True),
            StageModel(
                "transform", tf_cpu, tf_call, 0.0, tf_bytes, threads_knob="transform_threads", batched=True
            ),
            StageModel("prefetch", u(0.005e-6, 0.02e-6), u(2e-6, 10e-6), 0.0, tf_bytes, buffer_knob="prefetch", batched=True),
        ),
        batch_knob="batch_size",
        default_batch=1024,
        base_mb=u(150, 600),
        burstiness=float(rng.uniform(0.1, 0.3)),
        oversub_overhead=float(rng.uniform(0.02, 0.1)),
        source="synthetic",
    )


def model_from_space(
    space: KnobSpace,
    *,
    costs: Mapping[str, Mapping[str, float]] | None = None,
    name: str | None = None,
    source: str = "uninformed",
    **model_fields: float,
) -> PipelineModel:
    """A :class:`PipelineModel` with the structure of ``space``'s knobs.

    Stages are the knobs' ``stage`` names in order of first appearance (a knob without a stage
    is its own stage). A stage's ``cpu`` knob sets its threads and its ``buffer`` knob its output
    buffer; the first ``batch`` knob sets the rows per element of its stage and every later one.
    ``costs[stage]`` gives the :class:`StageModel` fields (``cpu_s_per_row`` ...); stages
    without costs get a uniform 1 microsecond per row, an uninformed prior.
    """
    order: list[str] = []
    by_stage: dict[str, list[Knob]] = {}
    for k in space.knobs:
        stage = k.stage or k.name
        if stage not in by_stage:
            order.append(stage)
            by_stage[stage] = []
        by_stage[stage].append(k)
    costs = costs or {}
    batch_knob = next((k for k in space.knobs if k.kind == "batch"), None)
    batched = False
    stages = []
    for stage in order:
        knobs = by_stage[stage]
        if batch_knob is not None and batch_knob in knobs:
            batched = True
        fields: dict[str, float] = {"cpu_s_per_row": 1e-6, **costs.get(stage, {})}
        cpu_knob = next((k for k in knobs if k.kind == "cpu"), None)
        stages.append(
            StageModel(
                name=stage,
                threads_knob=cpu_knob.name if cpu_knob else None,
                threads_cap_knob=cpu_knob.limited_by if cpu_knob else None,
                buffer_knob=next((k.name for k in knobs if k.kind == "buffer"), None),
                batched=batched,
                **fields,
            )
        )
    return PipelineModel(
        name=name or space.name,
        stages=tuple(stages),
        batch_knob=batch_knob.name if batch_knob else None,
        default_batch=batch_knob.initial if batch_knob else 1,
        source=source,
        **model_fields,
    )
