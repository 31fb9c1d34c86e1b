"""The memory probe: one cold rollout function per memory size, all at once.

Changing a Lambda function's memory starts new sandboxes, so every memory size of
the sweep costs a cold start however it is visited. Visiting the sizes one training
iteration at a time (the first pilot design) paid those cold starts one after the
other, with the learner VM waiting through each. The probe instead invokes one
function per memory size concurrently - on AWS, one alias per size invoked in
parallel, as Lambda Power Tuning does - so the cold starts overlap and the sweep costs
about one cold start of time.

Each size is invoked twice, back to back: the first call is cold (its reported init
time - REPORT ``Init Duration`` on AWS, ``BillingRecord.init_ms`` on the emulator - is
the size's cold-start time), the second is warm and gives the size's rollout speed.
Subtracting the init from a single cold call is not enough on every backend: on Ray
the first call to a fresh worker also pays one-time costs the backend does not report
as init, and a first call anywhere pays first-use costs (the env made, the policy's first
forward pass) inside its handler duration. So the cold call only starts the sandbox and
warms the handler: it runs ``PROBE_COLD_STEPS`` (32) env steps, the warm call
``PROBE_STEPS`` (256), which saves the cold calls most of their GB-seconds.

The speed ratios between sizes come from the warm calls' handler durations as measured
(``duration_s``: REPORT ``Duration`` on AWS, to 0.01 ms), not from the billed durations,
which are rounded up to the next millisecond: at 256 CartPole steps one vCPU runs about
7.5 ms, so rounding alone could move a ratio by up to 13%, enough to flip a near-tie
between two memory sizes.

Sizes past the plateau are not probed. A rollout handler is single-threaded, so memory
above one vCPU (1,769 MB) buys it little or nothing, yet a call at 10,240 MB costs 5.8x
one at 1,769 MB. The sizes up to one vCPU and the first size above it are invoked
together (the first wave); each larger size is then invoked on its own, and only while
the size before it ran at least ``PLATEAU_GAIN`` (10%) faster per step than its own
predecessor (the warm calls' handler durations). The sizes left out are reported
(``skipped_sizes``); the performance model takes them to run like the largest size
probed (``PerformanceModel._k``), which is what a plateau means.

The probe's rollouts come from the untrained policy and are not trained on: their
time and cost are tuning overhead, reported as such.

For the cost objective most of the probe cannot pay: when the pilot's first rollouts keep
one CPU busy on one thread, one vCPU is the cheapest size (:func:`cost_probe_sizes`), and
the probe shrinks to the baseline's own size, or to nothing (:func:`no_probe`).

Clock: on the modelled clock (local emulator) the probe's span is, per wave, the
makespan of the sizes run concurrently (the slowest size's cold plus warm call),
summed over the waves: what they would take on Lambda. On a measured backend the
calls run one after the other here, so the measured span is their sum, and is
labelled so.

Overlap with the pilot (modelled clock only): nothing in the pilot depends on the
probe (the pilot runs at 1,769 MB along a fixed schedule), so on Lambda both start
together - the probe's functions (one alias per size) beside the pilot's - and the
learner VM, busy with the pilot's updates, does not wait for the probe unless the probe
outlasts the pilot. :func:`charge_learner_wait` prices that: the probe adds
``max(0, span - pilot time)`` to the run's time and that much learner-VM time to its
cost; its functions' GB-seconds and requests are paid in full either way. Here the
calls still run before the pilot (the emulator's CPU-time clock is per call, so running
them one after the other changes no modelled figure). On a measured backend the probe
really ran before the pilot, so the learner waited its whole span.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, TypedDict

from core.json_edge import JsonObject
from optimizers.seraph.models import Observation
from serverless.invocation import LAMBDA_MB_PER_VCPU  # one full vCPU
from serverless.run_shape import RunShape

PROBE_STEPS = 256  # env steps of the warm call: long enough to dwarf the per-call overhead
PROBE_COLD_STEPS = 32  # env steps of the cold call, which only starts the sandbox and warms the handler
PLATEAU_GAIN = 0.10  # a larger size is probed only while the last one gained at least this per step
#: A handler's CPU time over its duration that marks a rollout CPU-bound on one thread.
CPU_BOUND_SHARE = (0.8, 1.1)
_PROBE_SEED_OFFSET = 1_000_000  # probe rollouts draw env seeds apart from any training iteration's


@dataclass(frozen=True)
class ProbeRow:
    memory_mb: int
    steps: int
    cold_lambda_s: float  # the cold call's Lambda-clock time (cold start included)
    init_s: float  # its cold-start part (sandbox + imports), as the backend reports it
    warm_lambda_s: float  # the warm call's Lambda-clock time: the size's rollout time
    billed_s: float  # the warm call's billed duration (rounded up to the billing unit)
    duration_s: float  # the warm call's handler duration as measured (not rounded): the speed
    cold_steps: int  # the cold call's env steps (``steps`` is the warm call's)

    def as_dict(self) -> JsonObject:
        return {
            "memory_mb": self.memory_mb, "steps": self.steps, "cold_steps": self.cold_steps,
            "cold_lambda_s": self.cold_lambda_s, "init_s": self.init_s, "warm_lambda_s": self.warm_lambda_s,
            "billed_s": self.billed_s, "duration_s": self.duration_s,
        }

    def observation(self) -> Observation:
        return Observation(
            shape=RunShape(1, self.memory_mb, self.steps), rollout_s=self.warm_lambda_s, billed_s=self.billed_s,
            learner_s=0.0, iteration_s=self.warm_lambda_s, cold=False, rollout_only=True, duration_s=self.duration_s,
        )


class ProbeSummary(TypedDict):
    """What the probe measured (:func:`_summary`): per size a :class:`ProbeRow`, the
    observations for the performance model, its span and its functions' cost."""

    rows: list[JsonObject]  # ProbeRow.as_dict() per size
    observations: list[Observation]
    env_steps: int
    skipped_sizes: list[int]
    skipped_reason: str | None
    span_s: float
    span_label: str
    overlaps_pilot: bool
    function_cost_usd: float
    learner_usd_per_s: float
    cost_label: str


class MemoryProbe(ProbeSummary):
    """The probe charged its learner wait (:func:`charge_learner_wait`): what it adds to the
    run's time and cost."""

    beside_s: float
    learner_wait_s: float
    lambda_time_s: float
    lambda_time_label: str
    cost_usd: float


def _summary(
    rows: list[ProbeRow], waves_s: list[float], skipped: list[int], modelled: bool, ledger: Any, steps: int, cold_steps: int
) -> ProbeSummary:
    """The probe's rows, observations, span and function cost (no learner time yet)."""
    per_size = [r.cold_lambda_s + r.warm_lambda_s for r in rows]
    return {
        "rows": [r.as_dict() for r in rows],
        "observations": [r.observation() for r in rows],
        "env_steps": (cold_steps + steps) * len(rows),
        "skipped_sizes": skipped,
        "skipped_reason": (
            f"past the plateau: {rows[-1].memory_mb} MB ran less than {PLATEAU_GAIN:.0%} faster per step than "
            f"{rows[-2].memory_mb} MB" if skipped else None
        ),
        "span_s": sum(waves_s) if modelled else sum(per_size),
        "span_label": (
            f"modelled: the sizes invoked concurrently in {len(waves_s)} wave(s) (sum of the waves' makespans)" if modelled
            else "measured: the sizes invoked one after the other (sum)"
        ),
        # on the modelled clock the probe runs beside the pilot (see the module docstring)
        "overlaps_pilot": modelled,
        "function_cost_usd": ledger.total_usd,  # GB-seconds and requests; no learner time yet
        "learner_usd_per_s": ledger.prices.vm_cost(1.0),
        "cost_label": ledger.label,
    }


def probe_memory_sizes(
    env_id: str,
    memory_sizes: list[int],
    backend: Any,
    *,
    hidden: tuple[int, ...],
    seed: int = 0,
    steps: int = PROBE_STEPS,
    cold_steps: int = PROBE_COLD_STEPS,
    architecture: str = "x86_64",
    env_kwargs: JsonObject | None = None,
) -> MemoryProbe:
    """Invoke a cold rollout of ``cold_steps`` and a warm one of ``steps`` env steps at each
    memory size; price them.

    Returns ``rows`` (one :class:`ProbeRow` dict per size), ``observations`` for the
    performance model, and the probe's ``lambda_time_s`` and ``cost_usd`` with labels.
    """
    from serverless.envs import inspect_env
    from serverless.ledger import CostLedger
    from serverless.network import NetworkSpec
    from serverless.ppo import PPOConfig, PPOLearner
    from serverless.pricing import PriceTable
    from serverless.trainer import rollout_events

    if not memory_sizes:
        raise ValueError("the memory probe needs at least one memory size")
    learner = PPOLearner(inspect_env(env_id, hidden=hidden, env_kwargs=env_kwargs), PPOConfig(network=NetworkSpec(hidden)), seed=seed)
    ledger = CostLedger(PriceTable.load(), architecture=architecture)
    rows: list[ProbeRow] = []
    labels: set[str] = set()

    def call(memory_mb: int, i: int, n_steps: int) -> tuple[Any, float]:
        run = RunShape(actors=1, memory_mb=memory_mb, batch=n_steps)
        batch = backend.invoke(rollout_events(env_id, seed, _PROBE_SEED_OFFSET + i, learner, run, env_kwargs=env_kwargs), memory_mb, concurrency=1)
        labels.add(batch.lambda_s_label)
        bill = batch.invocations[0].billing
        if bill.error is not None:
            raise RuntimeError(f"memory probe at {memory_mb} MB failed: {bill.error}")
        ledger.add_invocation(bill.charged_ms, bill.memory_mb)
        return bill, batch.lambda_s

    per_step_ms: list[float] = []  # the warm calls' handler duration per step, in probe order
    waves_s: list[float] = []
    skipped: list[int] = []
    waves = probe_waves(memory_sizes)
    for w, wave in enumerate(waves):
        if w > 0 and not still_gaining(per_step_ms):
            skipped = [m for later in waves[w:] for m in later]
            break
        spans = []
        for memory_mb in wave:
            i = len(rows)
            cold_bill, cold_s = call(memory_mb, 2 * i, cold_steps)
            warm_bill, warm_s = call(memory_mb, 2 * i + 1, steps)
            rows.append(ProbeRow(memory_mb, steps, cold_s, cold_bill.init_ms / 1000.0, warm_s,
                                 warm_bill.billed_ms / 1000.0, warm_bill.duration_ms / 1000.0, cold_steps))
            per_step_ms.append(warm_bill.duration_ms / steps)
            spans.append(cold_s + warm_s)
        waves_s.append(max(spans))
    probe = _summary(rows, waves_s, skipped, labels == {"modelled"}, ledger, steps, cold_steps)
    return charge_learner_wait(probe, beside_s=0.0)


def cost_probe_sizes(cpu_share: float | None, sweep: list[int], baseline_mb: int) -> list[int] | None:
    """The sizes a cost-objective profile still probes once the pilot's first rollouts showed
    how they use the CPU, or None to probe the whole ``sweep``.

    Lambda gives a function CPU in proportion to its memory, one vCPU at 1,769 MB. A rollout
    that keeps one CPU busy on one thread (its handlers' CPU time 80-110% of their duration,
    :data:`CPU_BOUND_SHARE`) runs proportionally slower below one vCPU, at the same price per
    env step, so the learner only waits longer; above one vCPU it has no second thread to use
    what the price buys. For the cost objective one vCPU is then the cheapest size, and the
    probe would only confirm it: it probes the baseline's size alone (nothing when that is one
    vCPU, which the pilot measures). A rollout that waits (I/O, a loaded host) or runs threads
    may be cheaper elsewhere, and gets the whole sweep."""
    lo, hi = CPU_BOUND_SHARE
    if cpu_share is None or not lo <= cpu_share <= hi:
        return None
    return [m for m in sweep if m == baseline_mb and m != LAMBDA_MB_PER_VCPU]


def no_probe(skipped: list[int], reason: str, *, learner_usd_per_s: float, modelled: bool) -> MemoryProbe:
    """The probe's result when it probes no size: the same fields, nothing spent."""
    return charge_learner_wait({
        "rows": [], "observations": [], "env_steps": 0, "skipped_sizes": skipped, "skipped_reason": reason,
        "span_s": 0.0, "span_label": "no size probed", "overlaps_pilot": modelled, "function_cost_usd": 0.0,
        "learner_usd_per_s": learner_usd_per_s, "cost_label": "modelled from price table",
    }, beside_s=0.0)


def probe_waves(memory_sizes: list[int]) -> list[list[int]]:
    """The sizes up to one vCPU and the first above it together, then one wave per larger size."""
    sizes = sorted(set(memory_sizes))
    above = [m for m in sizes if m > LAMBDA_MB_PER_VCPU]
    return [[m for m in sizes if m <= LAMBDA_MB_PER_VCPU] + above[:1], *([m] for m in above[1:])]


def still_gaining(per_step_ms: list[float]) -> bool:
    """Did the largest size probed so far run at least PLATEAU_GAIN faster per step than the one before?"""
    if len(per_step_ms) < 2:
        return True
    return per_step_ms[-1] <= (1.0 - PLATEAU_GAIN) * per_step_ms[-2]


def charge_learner_wait(probe: ProbeSummary, *, beside_s: float) -> MemoryProbe:
    """The probe's time and cost once it runs beside ``beside_s`` seconds of other work
    (the pilot's Lambda-clock time) that keeps the learner VM busy anyway.

    ``lambda_time_s`` is what the probe adds to the run's time - its span less the work
    beside it, at least 0, on the modelled clock; its whole span on a measured backend,
    where it ran alone - and ``cost_usd`` is its functions' cost plus the learner VM's
    wait for that time. Recomputed from ``span_s`` each call, so it can be applied again.
    """
    if beside_s < 0:
        raise ValueError(f"beside_s must be at least 0, got {beside_s}")
    span = float(probe["span_s"])
    overlap = probe["overlaps_pilot"]
    wait = max(0.0, span - beside_s) if overlap else span
    label = probe["span_label"]
    if overlap and beside_s > 0:
        label += f"; run beside {beside_s:.2f} s of pilot, it adds the part that outlasts the pilot"
    return {
        **probe,
        "beside_s": beside_s if overlap else 0.0,
        "learner_wait_s": wait,
        "lambda_time_s": wait,
        "lambda_time_label": label,
        "cost_usd": float(probe["function_cost_usd"]) + wait * float(probe["learner_usd_per_s"]),
    }
