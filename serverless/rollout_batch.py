"""Rollout events out to the functions, and their trajectories back into one PPO batch."""

from __future__ import annotations

from typing import TypedDict

import numpy as np

from core.json_edge import JsonObject
from serverless.invocation import InvokeBatch
from serverless.policy import decode_npz_field, encode_b64, export_numpy
from serverless.ppo import PPOLearner, compute_gae
from serverless.run_shape import RunShape
from serverless.slots import slot_plan
from serverless.rollout_event import EpisodeSnapshot, RolloutEvent, RolloutReply


def decode_trajectories(result: RolloutReply) -> dict[str, np.ndarray]:
    """A handler result's trajectories (npz, never pickle), inline or from S3."""
    return decode_npz_field(result, "trajectories")


_STEP_ARRAYS = ("obs", "actions", "logprobs", "values", "rewards", "terminated", "truncated", "trunc_values")


# one env stream's segment: (slot or None, step arrays, the bootstrap value after its last step)
Segment = tuple[int | None, dict[str, np.ndarray], float]


def _segments(tr: dict[str, np.ndarray]) -> list[Segment]:
    """A result's segments as (slot or None, arrays, last value); one unless it ran slots."""
    if "segment_lengths" not in tr:
        return [(None, tr, float(tr["last_value"]))]
    out, start = [], 0
    for slot, n, last in zip(tr["segment_slots"], tr["segment_lengths"], tr["last_value"]):
        end = start + int(n)
        out.append((int(slot), {k: tr[k][start:end] for k in _STEP_ARRAYS}, float(last)))
        start = end
    return out


def decode_segments(results: list[RolloutReply]) -> list[Segment]:
    """Every result's segments, decoded; segments from env slots are put in slot order, so
    the batch (and the minibatches the learner draws from it) does not depend on which
    function ran which slot."""
    segments = [seg for result in results for seg in _segments(decode_trajectories(result))]
    if all(slot is not None for slot, _, _ in segments):
        segments.sort(key=lambda seg: seg[0])
    return segments


def batch_from_segments(segments: list[Segment], gamma: float, lam: float) -> dict[str, np.ndarray]:
    """Concatenate the segments, with GAE advantages and returns computed per segment."""
    parts: dict[str, list[np.ndarray]] = {k: [] for k in ("obs", "actions", "logprobs", "values", "advantages", "returns")}
    for _, tr, last_value in segments:
        adv, ret = compute_gae(
            tr["rewards"], tr["values"], tr["terminated"], tr["truncated"], tr["trunc_values"],
            last_value, gamma, lam,
        )
        for k in ("obs", "actions", "logprobs", "values"):
            parts[k].append(tr[k])
        parts["advantages"].append(adv)
        parts["returns"].append(ret)
    return {k: np.concatenate(v) for k, v in parts.items()}


def assemble_batch(results: list[RolloutReply], gamma: float, lam: float) -> dict[str, np.ndarray]:
    """The results' trajectories as one PPO batch (:func:`decode_segments`, then
    :func:`batch_from_segments`)."""
    return batch_from_segments(decode_segments(results), gamma, lam)


def _event_seed(seed: int, iteration: int, actor_id: int) -> int:
    return int(np.random.SeedSequence([seed, iteration, actor_id]).generate_state(1)[0])


def rollout_events(
    env_id: str,
    seed: int,
    iteration: int,
    learner: PPOLearner,
    run: RunShape,
    steps_per_env: int = 0,
    slot_episodes: dict[int, EpisodeSnapshot] | None = None,
    env_kwargs: JsonObject | None = None,
) -> list[RolloutEvent]:
    """One event per actor; the weights are encoded once and shared by all.

    Each event carries its env slots, each seeded by (seed, iteration, slot) and with its
    episode in progress from ``slot_episodes`` when known, so a slot's env and actions do
    not depend on the function (or instance, or attempt) that runs it. ``steps_per_env``
    > 0 splits the batch into slots of about that many steps (:func:`slot_plan`); 0 is one
    env per function: slot ``k`` is actor ``k``'s env, with the actor's share of the batch.
    A retried or hedged attempt therefore steps exactly the experience of the attempt it
    replaces, in either layout. Non-empty ``env_kwargs`` ride in every event as JSON.
    """
    weights_b64 = encode_b64(export_numpy(learner.model))
    spec_dict = learner.spec.to_dict()
    events = [
        {
            "env_id": env_id,
            "num_steps": n,
            "seed": _event_seed(seed, iteration, actor_id),
            "policy_spec": spec_dict,
            "actor_id": actor_id,
            "weights_npz_b64": weights_b64,
        }
        | ({"env_kwargs": dict(env_kwargs)} if env_kwargs else {})
        for actor_id, n in enumerate(run.fragments())
    ]
    if steps_per_env > 0:
        plan = slot_plan(run.batch, run.actors, steps_per_env)
    else:
        plan = [[(actor_id, n)] for actor_id, n in enumerate(run.fragments())]
    for event, slots in zip(events, plan):
        event["slots"] = [
            {"slot": k, "num_steps": n, "seed": _event_seed(seed, iteration, k)}
            | ({"episode": slot_episodes[k]} if slot_episodes and k in slot_episodes else {})
            for k, n in slots
        ]
        event["num_steps"] = sum(n for _, n in slots)
    return events


class _RolloutSummaryRequired(TypedDict):
    """The figures every iteration's summary has."""

    invocations: int
    errors: int
    cold_starts: int
    init_ms_total: float
    replayed_slots: int
    billed_ms_total: int
    mean_duration_ms: float | None
    max_duration_ms: float | None
    billing_label: str | None
    handler_cpu_share: float | None
    handler_cpu_share_best: float | None
    measured_wall_s: float
    lambda_s: float
    lambda_s_label: str
    concurrency: int


class RolloutSummary(_RolloutSummaryRequired, total=False):
    """One iteration's invocations in figures (:func:`rollout_summary`); with ``rounds`` and
    ``wasted_attempts`` when a retry or a hedge took more than one round."""

    rounds: int
    wasted_attempts: int


def rollout_summary(batch: InvokeBatch) -> RolloutSummary:
    """One iteration's invocations in figures (kept in its ``IterationRecord``)."""
    bills = [inv.billing for inv in batch.invocations]
    ok = [b for b in bills if b.error is None]
    return {
        "invocations": len(bills),
        "errors": len(bills) - len(ok),
        "cold_starts": sum(1 for b in bills if b.cold_start),
        "init_ms_total": sum(b.init_ms for b in bills if b.cold_start),  # charged as INIT (BillingRecord.charged_ms)
        # env slots rebuilt by replay on an instance that did not have them (serverless.handler)
        "replayed_slots": sum(int(inv.result.get("replayed_slots", 0)) for inv in batch.invocations if inv.result),
        "billed_ms_total": sum(b.billed_ms for b in bills),
        "mean_duration_ms": float(np.mean([b.duration_ms for b in ok])) if ok else None,
        "max_duration_ms": float(max(b.duration_ms for b in ok)) if ok else None,
        "billing_label": bills[0].label if bills else None,
        "handler_cpu_share": handler_cpu_share(batch),
        "handler_cpu_share_best": best_handler_cpu_share(batch),
        "measured_wall_s": batch.wall_s,
        "lambda_s": batch.lambda_s,
        "lambda_s_label": batch.lambda_s_label,
        "concurrency": batch.concurrency,
    }


def _handler_cpu(batch: InvokeBatch) -> list[tuple[float, float]]:
    """(CPU ms, duration ms less the time queued for a CPU) of each successful call that
    reported its timings."""
    out = []
    for inv in batch.invocations:
        timings = (inv.result or {}).get("timings") if inv.billing.error is None else None
        if isinstance(timings, dict) and timings.get("total_ms"):
            running = float(timings["total_ms"]) - float(timings.get("queued_ms", 0.0))
            out.append((float(timings.get("cpu_ms", 0.0)), max(running, 0.0)))
    return out


def handler_cpu_share(batch: InvokeBatch) -> float | None:
    """The handlers' CPU time over their duration, both as the handlers measured them
    (``timings.cpu_ms`` / ``timings.total_ms``), the duration less the time the handler sat
    on a host's run queue (``timings.queued_ms``: a loaded host's wait, not the handler's),
    summed over the batch's successful calls; None when no call reported them. About 1 for
    a rollout that keeps one CPU busy, well under 1 for one that waits (on I/O), above 1 for
    several threads."""
    calls = _handler_cpu(batch)
    total = sum(t for _, t in calls)
    return sum(c for c, _ in calls) / total if total > 0 else None


def best_handler_cpu_share(batch: InvokeBatch) -> float | None:
    """The largest one call's CPU time over its duration (None when no call reported them).
    Where calls share a host's cores (the local emulator runs more functions than the machine
    has CPUs, or other work loads it), a CPU-bound handler reads low in the summed share; the
    call that had a CPU to itself shows what the handler does with one. On Lambda, where
    every function has its own CPU, the two agree."""
    shares = [c / t for c, t in _handler_cpu(batch) if t > 0]
    return max(shares, default=None)
