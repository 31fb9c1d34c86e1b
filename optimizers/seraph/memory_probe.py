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
as init.

The probe's rollouts come from the untrained policy and are not trained on: their
time and cost are tuning overhead, reported as such.

Clock: on the modelled clock (local emulator) the probe's time is the makespan of
the sizes run concurrently (the slowest size's cold plus warm call), which is what
they would take on Lambda. On a measured backend the calls run one after the other
here, so the measured time is their sum, and is labelled so.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from optimizers.seraph.models import Observation, RunShape

PROBE_STEPS = 256  # env steps per probe invocation: long enough to dwarf the per-call overhead
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
    """Invoke a cold and a warm rollout of ``steps`` env steps at each memory size; price them.

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

    for i, memory_mb in enumerate(memory_sizes):
        cold_bill, cold_s = call(memory_mb, 2 * i)
        warm_bill, warm_s = call(memory_mb, 2 * i + 1)
        rows.append(ProbeRow(memory_mb, steps, cold_s, cold_bill.init_ms / 1000.0, warm_s, warm_bill.billed_ms / 1000.0))
    modelled = labels == {"modelled"}
    per_size = [r.cold_lambda_s + r.warm_lambda_s for r in rows]
    lambda_time_s = max(per_size) if modelled else sum(per_size)
    ledger.add_learner_time(lambda_time_s)  # the learner VM waits for the probe
    return {
        "rows": [r.as_dict() for r in rows],
        "observations": [r.observation() for r in rows],
        "env_steps": 2 * steps * len(rows),
        "lambda_time_s": lambda_time_s,
        "lambda_time_label": (
            "modelled: the sizes invoked concurrently (makespan)" if modelled
            else "measured: the sizes invoked one after the other (sum)"
        ),
        "cost_usd": ledger.total_usd,
        "cost_label": ledger.label,
    }
