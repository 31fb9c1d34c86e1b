"""The memory probe: one cold rollout function per memory size, all at once.

Changing a Lambda function's memory starts new sandboxes, so every memory size of
the sweep costs a cold start however it is visited. Visiting the sizes one training
iteration at a time (the first pilot design) paid those cold starts one after the
other, with the learner VM waiting through each. The probe instead invokes one
function per memory size concurrently - on AWS, one alias per size invoked in
parallel, as Lambda Power Tuning does - so the cold starts overlap and the sweep costs
about one cold start of time.

Each size is first invoked cold (its reported init time - REPORT ``Init Duration`` on
AWS, ``BillingRecord.init_ms`` on the emulator - is the size's cold-start time). Then
every size is invoked warm ``WARM_ROUNDS`` (3) times, round-robin over the sizes (each
round in the opposite order to the one before), and the median warm call gives the
size's rollout speed. A 256-step warm call is 8-60 ms of CPU, and the CPU time of this
machine moves up to 2x for seconds at a time when the other core is busy: one warm call
per size, in size order, measured 885 and 1,769 MB at 17 ms and 3,008 MB at 8 ms in one
profile (the emulator runs a single-threaded handler alike at and above 1,769 MB), and the
plans then bought 3,008 MB. Interleaving spreads such a slow phase over the sizes.
Subtracting the init from a single cold call is not enough on every backend: on Ray
the first call to a fresh worker also pays one-time costs the backend does not report
as init.

The probe's rollouts come from the untrained policy and are not trained on: their
time and cost are tuning overhead, reported as such.

Clock: on the modelled clock (local emulator) the probe's time is the makespan of
the sizes run concurrently (the slowest size's cold call plus its warm calls), which is what
they would take on Lambda. On a measured backend the calls run one after the other
here, so the measured time is their sum, and is labelled so.
"""

from __future__ import annotations

import statistics
from dataclasses import dataclass
from typing import Any

from optimizers.seraph.models import Observation, RunShape

PROBE_STEPS = 256  # env steps per probe invocation: long enough to dwarf the per-call overhead
WARM_ROUNDS = 3  # warm calls per size, interleaved across the sizes; the median is the size's speed
_PROBE_SEED_OFFSET = 1_000_000  # probe rollouts draw env seeds apart from any training iteration's


@dataclass(frozen=True)
class ProbeRow:
    memory_mb: int
    steps: int
    cold_lambda_s: float  # the cold call's Lambda-clock time (cold start included)
    init_s: float  # its cold-start part (sandbox + imports), as the backend reports it
    warm_lambda_s: float  # the warm call's Lambda-clock time: the size's rollout time
    billed_s: float  # the warm call's billed duration

    def as_dict(self) -> dict[str, Any]:
        return {
            "memory_mb": self.memory_mb, "steps": self.steps, "cold_lambda_s": self.cold_lambda_s,
            "init_s": self.init_s, "warm_lambda_s": self.warm_lambda_s, "billed_s": self.billed_s,
        }

    def observation(self) -> Observation:
        return Observation(
            shape=RunShape(1, self.memory_mb, self.steps), rollout_s=self.warm_lambda_s, billed_s=self.billed_s,
            learner_s=0.0, iteration_s=self.warm_lambda_s, cold=False, rollout_only=True,
        )


def probe_memory_sizes(
    env_id: str,
    memory_sizes: list[int],
    backend: Any,
    *,
    hidden: tuple[int, ...],
    seed: int = 0,
    steps: int = PROBE_STEPS,
    architecture: str = "x86_64",
) -> dict[str, Any]:
    """Invoke a cold rollout of ``steps`` env steps at each memory size, then ``WARM_ROUNDS``
    warm ones interleaved across the sizes; price them.

    Returns ``rows`` (one :class:`ProbeRow` dict per size), ``observations`` for the
    performance model, and the probe's ``lambda_time_s`` and ``cost_usd`` with labels.
    """
    from serverless.envs import inspect_env
    from serverless.ledger import CostLedger
    from serverless.ppo import PPOConfig, PPOLearner
    from serverless.pricing import PriceTable
    from serverless.trainer import RunConfig, rollout_events

    if not memory_sizes:
        raise ValueError("the memory probe needs at least one memory size")
    learner = PPOLearner(inspect_env(env_id, hidden=hidden), PPOConfig(hidden=hidden), seed=seed)
    ledger = CostLedger(PriceTable.load(), architecture=architecture)
    rows: list[ProbeRow] = []
    labels: set[str] = set()

    def call(memory_mb: int, i: int) -> tuple[Any, float]:
        run = RunConfig(actors=1, memory_mb=memory_mb, batch=steps)
        batch = backend.invoke(rollout_events(env_id, seed, _PROBE_SEED_OFFSET + i, learner, run), memory_mb, concurrency=1)
        labels.add(batch.lambda_s_label)
        bill = batch.invocations[0].billing
        if bill.error is not None:
            raise RuntimeError(f"memory probe at {memory_mb} MB failed: {bill.error}")
        ledger.add_invocation(bill.billed_ms, bill.memory_mb)
        return bill, batch.lambda_s

    n = len(memory_sizes)
    colds = [call(m, i) for i, m in enumerate(memory_sizes)]
    warm: dict[int, list[tuple[float, float]]] = {m: [] for m in memory_sizes}  # (lambda s, billed s)
    for r in range(WARM_ROUNDS):
        order = list(enumerate(memory_sizes)) if r % 2 == 0 else list(enumerate(memory_sizes))[::-1]
        for i, m in order:
            bill, lam = call(m, n * (r + 1) + i)
            warm[m].append((lam, bill.billed_ms / 1000.0))
    for (cold_bill, cold_s), memory_mb in zip(colds, memory_sizes):
        lams, billed = zip(*warm[memory_mb])
        rows.append(ProbeRow(memory_mb, steps, cold_s, cold_bill.init_ms / 1000.0,
                             statistics.median(lams), statistics.median(billed)))
    modelled = labels == {"modelled"}
    # on the modelled clock each size is its own function: cold call, then its warm calls
    per_size = [cold_s + sum(lam for lam, _ in warm[m]) for (_, cold_s), m in zip(colds, memory_sizes)]
    lambda_time_s = max(per_size) if modelled else sum(per_size)
    ledger.add_learner_time(lambda_time_s)  # the learner VM waits for the probe
    return {
        "rows": [r.as_dict() for r in rows],
        "observations": [r.observation() for r in rows],
        "env_steps": (1 + WARM_ROUNDS) * steps * len(rows),
        "lambda_time_s": lambda_time_s,
        "lambda_time_label": (
            "modelled: the sizes invoked concurrently (makespan)" if modelled
            else "measured: the sizes invoked one after the other (sum)"
        ),
        "cost_usd": ledger.total_usd,
        "cost_label": ledger.label,
    }
