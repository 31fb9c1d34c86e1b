"""Move payloads too large for a synchronous Lambda invoke through S3.

Lambda's synchronous request and response are each limited to 6 MB
(:data:`serverless.invocation.LAMBDA_SYNC_PAYLOAD_LIMIT_BYTES`). Policy weights
above that go to S3 before the invoke (the event then carries ``weights_s3``),
and trajectories above it go to S3 inside the function (the result then carries
``trajectories_s3``).

The same code runs in three places: inside Lambda (region from ``AWS_REGION``,
credentials from the execution role), on the learner, and in tests against
moto's server on loopback (endpoint from ``AWS_ENDPOINT_URL_S3`` or
``AWS_ENDPOINT_URL``, which boto3 reads itself). The client is created lazily,
so importing this module never needs boto3 configured.

Key layout, all under one prefix so the function's IAM role can be limited to it
(see ``infra/terraform/modules/rollout_lambda``)::

    <prefix>/weights/<sha256>.npz        written by the learner, read by the function
    <prefix>/trajectories/<id>.npz       written by the function, read and deleted by the learner
"""

from __future__ import annotations

import base64
import hashlib
import json
import os
import re
import threading
import uuid
from typing import Any

from serverless.invocation import LAMBDA_SYNC_PAYLOAD_LIMIT_BYTES
from serverless.rollout_event import RolloutReply

DEFAULT_PREFIX = "rollouts"
# Room left under the 6 MB limit for the JSON envelope around the large field.
PAYLOAD_HEADROOM_BYTES = 64 * 1024

# AWS's guidance for S3: retry 5xx, SlowDown (503) and throttling with exponential backoff and
# jitter. botocore's "standard" retry mode does exactly that; say so rather than rely on the
# installed default (legacy mode).
S3_MAX_ATTEMPTS = 5

_client_lock = threading.Lock()
_client: Any = None


def client_config() -> Any:
    """botocore configuration of every S3 client here: standard retries, bounded attempts."""
    from botocore.config import Config

    return Config(retries={"mode": "standard", "total_max_attempts": S3_MAX_ATTEMPTS}, connect_timeout=10, read_timeout=60)


def s3_client() -> Any:
    """The process-wide S3 client, created on first use (thread-safe).

    Region: ``AWS_REGION`` (set by Lambda) or ``AWS_DEFAULT_REGION``; endpoint:
    ``AWS_ENDPOINT_URL_S3``/``AWS_ENDPOINT_URL`` when set (boto3 reads both).
    """
    global _client
    with _client_lock:
        if _client is None:
            import boto3

            region = os.environ.get("AWS_REGION") or os.environ.get("AWS_DEFAULT_REGION")
            _client = boto3.session.Session().client("s3", region_name=region, config=client_config())
        return _client


def reset_client() -> None:
    """Forget the cached client (tests that change the endpoint or region call this)."""
    global _client
    with _client_lock:
        _client = None


def get_bytes(bucket: str, key: str, client: Any = None) -> bytes:
    """Read one object whole (``client`` overrides the process-wide one, e.g. another region)."""
    response = (client or s3_client()).get_object(Bucket=bucket, Key=key)
    return response["Body"].read()


def put_bytes(bucket: str, key: str, data: bytes, client: Any = None) -> None:
    """Write one object (server-side encryption is the bucket's default, see Terraform)."""
    (client or s3_client()).put_object(Bucket=bucket, Key=key, Body=data)


def delete_object(bucket: str, key: str, client: Any = None) -> None:
    """Delete one object; trajectories are deleted once read (a lifecycle rule is the backstop)."""
    (client or s3_client()).delete_object(Bucket=bucket, Key=key)


RUN_ID = re.compile(r"[0-9a-f]{8,32}")


def check_run_id(run_id: Any) -> str | None:
    """An event's ``run_id`` (8-32 lower-case hex digits) or None; ValueError for anything else."""
    if run_id is None:
        return None
    if not isinstance(run_id, str) or not RUN_ID.fullmatch(run_id):
        raise ValueError(f"run_id must be 8-32 lower-case hex digits, got {run_id!r}")
    return run_id


def trajectories_prefix(prefix: str, run_id: str | None = None) -> str:
    """``<prefix>/trajectories/`` and, for a run, its own folder ``<run_id>/`` under it."""
    return f"{prefix.strip('/')}/trajectories/" + (f"{run_id}/" if run_id else "")


def check_trajectories_ref(ref: Any, bucket: str, prefix: str, run_id: str | None = None) -> None:
    """A function's ``trajectories_s3`` names an object the learner will read and then delete:
    only a key under this run's ``<prefix>/trajectories/<run_id>/`` in the configured bucket is
    accepted (ValueError otherwise), so a compromised or buggy function cannot make the learner
    delete another run's trajectories or any other object."""
    if not isinstance(ref, dict) or set(ref) != {"bucket", "key"} or not all(isinstance(v, str) for v in ref.values()):
        raise ValueError(f"trajectories_s3 must be {{'bucket': str, 'key': str}}, got {ref!r}")
    under = trajectories_prefix(prefix, run_id)
    key = ref["key"]
    if ref["bucket"] != bucket or not key.startswith(under) or any(part in ("", ".", "..") for part in key[len(under):].split("/")):
        raise ValueError(f"trajectories_s3 names s3://{ref['bucket']}/{key}, outside this run's s3://{bucket}/{under}; "
                         "the learner reads and deletes only its own trajectories")


def weights_key(prefix: str, data: bytes) -> str:
    """Content-addressed key: one upload per distinct set of weights, shared by a whole batch."""
    return f"{prefix.strip('/')}/weights/{hashlib.sha256(data).hexdigest()}.npz"


def trajectories_key(prefix: str, actor_id: Any, run_id: str | None = None) -> str:
    """A fresh key per result, so retried invocations never overwrite each other; under the
    run's own folder when the event named its run."""
    return f"{trajectories_prefix(prefix, run_id)}{actor_id}-{uuid.uuid4().hex}.npz"


def json_size(obj: Any) -> int:
    """Size in bytes of ``obj`` as the JSON Lambda would carry."""
    return len(json.dumps(obj, separators=(",", ":")).encode("utf-8"))


def fits_inline(obj: Any, limit_bytes: int = LAMBDA_SYNC_PAYLOAD_LIMIT_BYTES) -> bool:
    """Whether ``obj`` fits a synchronous invoke's request or response, with headroom."""
    return json_size(obj) <= limit_bytes - PAYLOAD_HEADROOM_BYTES


def maybe_offload_result(
    result: RolloutReply,
    bucket: str | None,
    prefix: str = DEFAULT_PREFIX,
    limit_bytes: int = LAMBDA_SYNC_PAYLOAD_LIMIT_BYTES,
    run_id: str | None = None,
) -> RolloutReply:
    """Return ``result`` unchanged if it fits the response limit, else move its trajectories to S3.

    The returned copy has ``trajectories_s3 = {"bucket", "key"}`` instead of
    ``trajectories_npz_b64``. Called by the rollout handler just before it
    returns. With no bucket configured and a result too large, raise: Lambda
    would fail the call anyway, with a less helpful message.
    """
    if "trajectories_npz_b64" not in result or fits_inline(result, limit_bytes):
        return result
    if not bucket:
        raise ValueError(
            f"rollout result is {json_size(result)} bytes, over the {limit_bytes}-byte Lambda response "
            "limit, and no artifacts bucket is configured: set TRAINWISE_ARTIFACTS_BUCKET "
            "(Terraform sets it on the function) or lower num_steps per actor"
        )
    data = base64.b64decode(result["trajectories_npz_b64"])
    key = trajectories_key(prefix, result.get("actor_id", "actor"), run_id)
    put_bytes(bucket, key, data)
    offloaded = {k: v for k, v in result.items() if k != "trajectories_npz_b64"}
    offloaded["trajectories_s3"] = {"bucket": bucket, "key": key}
    return offloaded


def offload_bucket_from_env() -> tuple[str | None, str]:
    """The bucket and prefix the function was deployed with (Terraform sets both variables)."""
    return (
        os.environ.get("TRAINWISE_ARTIFACTS_BUCKET") or None,
        os.environ.get("TRAINWISE_S3_PREFIX", DEFAULT_PREFIX),
    )
