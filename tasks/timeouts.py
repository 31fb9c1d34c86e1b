"""How long each measuring or training task may run before Prefect stops it.

A measuring task holds a slot of its node's measurement limit (:mod:`tasks.measure`) and renews
the slot's lease while it runs, so a measurement that hangs (a tf.data worker stuck on a dead
file system, a rollout function that never answers) would hold the node forever. Every such task
therefore has a ``timeout_seconds``: when it runs out, Prefect raises a ``TimeoutError`` in the
task, the task's run ends ``TimedOut`` (a failed state), and leaving the ``concurrency`` block
releases the slot, so the next run measures.

The bounds are generous ceilings for real work, not estimates, and the time a task waits for
its slot counts toward them. The tuning and verifying tasks scale with what the spec asks for
(the flow passes :func:`tune_timeout_s` and :func:`verify_timeout_s` through ``with_options``);
the others have fixed ceilings. docs/prefect.md has the table.
"""

from __future__ import annotations

from typing import Any

#: profile-pipeline: one short measurement per stage and thread count (windows of at most 60 s).
PROFILE_PIPELINE_S = 3600.0
#: profile-rl-workload: a pilot, a few short training runs that probe the shapes.
PROFILE_RL_S = 2 * 3600.0
#: train-rl-on-functions and train-rl-baseline: one training run to the target.
TRAIN_RL_S = 12 * 3600.0
#: Slack above a tuning or verifying task's own arithmetic: waiting for the slot, starting the
#: measuring worker, the final re-measurement.
SLACK_S = 900.0
#: tune-pipeline's ceiling for the default time budget (the flow passes the spec's own).
TUNE_DEFAULT_S = 2 * 30.0 + SLACK_S
#: measure-configurations' ceiling for a few configurations at the final protocol.
VERIFY_DEFAULT_S = 1800.0


def tune_timeout_s(time_budget_s: float) -> float:
    """tune-pipeline: the optimizer stops at its budget; twice that plus the slack."""
    return 2.0 * float(time_budget_s) + SLACK_S


def verify_timeout_s(configs: int, ing: Any) -> float:
    """measure-configurations: each of ``configs`` configurations measured once at the spec's
    verify protocol (``ing`` is its IngestSpec); twice that plus the slack, and never below
    :data:`VERIFY_DEFAULT_S`."""
    from optimizers.tuning import verify_protocol

    protocol = verify_protocol(ing.verify_window_s, ing.verify_repeats)
    per_config = protocol.warmup_s + protocol.window_s * protocol.repeats
    return max(VERIFY_DEFAULT_S, 2.0 * max(configs, 1) * per_config + SLACK_S)
