"""Profile caching: what makes a cached profile valid, and how a flow reuses it.

A profile (Seraph's measured step times per configuration, InTune's per-stage
pipeline model) is expensive to measure and stays true as long as nothing it
depends on changes. Its cache key therefore hashes:

- the task's inputs: the workload section of the spec (env, target, data size...)
  and the backend;
- the task's source code (:data:`~prefect.cache_policies.TASK_SOURCE`), so a change
  to how we profile invalidates old profiles;
- this machine's hardware fingerprint (CPU model, core count, RAM), so the same
  workload on another machine is profiled afresh.

Records expire after the spec's ``cache.profile_ttl_hours``. They are stored as
JSON (never pickle) under ``.trainwise/prefect-results`` (``TRAINWISE_HOME``), next
to trainwise's other caches, so they survive a new ``PREFECT_HOME``; with
``TRAINWISE_STATE=s3://BUCKET/PREFIX`` (:mod:`core.state`) they are stored under
``PREFIX/prefect-results`` in that bucket instead, so another machine of the same
hardware (a worker of a work pool, a colleague's laptop) reuses them.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import timedelta
from typing import Any

from prefect import Task, get_run_logger
from prefect.cache_policies import INPUTS, TASK_SOURCE, CachePolicy
from prefect.context import TaskRunContext

from core import paths, state
from core.errors import UserError


@dataclass
class HardwareFingerprint(CachePolicy):
    """A cache-policy part that changes when the machine does."""

    def compute_key(
        self,
        task_ctx: TaskRunContext,
        inputs: dict[str, Any],
        flow_parameters: dict[str, Any],
        **kwargs: Any,
    ) -> str:
        return paths.hardware_fingerprint()


PROFILE_CACHE_POLICY = INPUTS + TASK_SOURCE + HardwareFingerprint()


def result_storage() -> Any:
    """Where cached results live, resolved at call time (so TRAINWISE_HOME and TRAINWISE_STATE
    apply): ``prefect-results`` under the home folder, or the S3 state's block (:func:`state_block`)."""
    s3 = state.s3_state()
    return paths.cache_dir("prefect-results") if s3 is None else state_block(s3)


def s3_bucket_block(s3: state.S3State) -> Any:
    """prefect-aws's ``S3Bucket`` block class; a UserError naming the extra when it is not installed."""
    try:
        from prefect_aws import S3Bucket
    except ImportError:
        raise UserError(
            f"{state.ENV}={s3.url} keeps Prefect's results on S3, which needs prefect-aws: "
            "pip install 'trainwise[aws]' (or unset it to keep state on the local disk)"
        ) from None
    return S3Bucket


def state_block(s3: state.S3State) -> str:
    """Save the prefect-aws ``S3Bucket`` block on ``s3``'s bucket, folder ``PREFIX/prefect-results``,
    and return its reference (``s3-bucket/trainwise-state-<hash of the location>``). Prefect keeps a
    task's result storage on the server, so the block is saved (overwritten: the same location
    always gives the same block). It holds no credentials: boto3 finds them (and the endpoint) in
    the usual AWS variables and files of the machine that reads or writes."""
    name = f"trainwise-state-{paths.fingerprint(s3.url)[:10]}"
    s3_bucket_block(s3)(bucket_name=s3.bucket, bucket_folder=s3.key("prefect-results")).save(name, overwrite=True)
    return f"s3-bucket/{name}"


def call_cached(
    task: Task[..., Any],
    *,
    what: str,
    ttl_hours: float,
    refresh: bool = False,
    **kwargs: Any,
) -> tuple[Any, bool]:
    """Run a profiling task through its cache; return ``(result, cache_hit)``.

    Logs ``profile cached: reusing ...`` on a hit and ``profile not cached ...`` on
    a miss, so both the terminal and the Prefect UI say which happened.
    """
    configured = task.with_options(
        result_storage=result_storage(),
        cache_expiration=timedelta(hours=ttl_hours),
        refresh_cache=refresh or None,
    )
    state = configured(**kwargs, return_state=True)
    value = state.result()  # raises the task's exception if it failed
    hit = state.name == "Cached"
    logger = get_run_logger()
    if hit:
        logger.info("profile cached: reusing the %s profile (same workload, code and hardware %s)", what, paths.hardware_fingerprint())
    else:
        reason = "refresh requested" if refresh else "new workload, code or hardware, or expired"
        logger.info("profile not cached: measured the %s profile afresh (%s)", what, reason)
    return value, hit
