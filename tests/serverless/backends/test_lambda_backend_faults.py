"""S3 and Lambda faults against moto's server on 127.0.0.1: each is retried as AWS advises and
succeeds, or fails with a clear error.

moto answers every request correctly, so the faults are injected with botocore's
``before-send`` event on the real (moto-backed) clients: a handler returns the error
response AWS would send (S3's 503 SlowDown, Lambda's 500/502/503, 429 forever) or raises the
connection error botocore would raise, and otherwise lets the request through to moto.
Sleeps are recorded, not slept: botocore's own backoff for S3 and the trainer's collector's for
Lambda (the one retry policy of a Lambda call: the backend makes one attempt per call).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import boto3
import pytest
from botocore.awsrequest import AWSResponse, HeadersDict
from botocore.exceptions import ConnectionClosedError, EndpointConnectionError, ReadTimeoutError

from core.errors import UserError
from serverless import s3_payload
from tests.serverless.backends.test_lambda_backend import (  # noqa: F401  (fixtures are used by name)
    FakeLambdaDataPlane,
    _Raw,
    aws,
    collect,
    collector_sleeps,
    deployed,
    hooked,
    ledger_of,
    make_backend,
    make_events,
    moto_url,
)

S3_SLOWDOWN = (b'<?xml version="1.0" encoding="UTF-8"?><Error><Code>SlowDown</Code>'
               b"<Message>Please reduce your request rate.</Message></Error>")
S3_DENIED = b'<?xml version="1.0" encoding="UTF-8"?><Error><Code>AccessDenied</Code><Message>Access Denied</Message></Error>'


class Faults:
    """A before-send handler that answers the first ``count`` matching requests with a fault."""

    def __init__(self, fault: Any, count: int | None) -> None:
        self.fault, self.count, self.seen = fault, count, 0

    def __call__(self, request: Any, **_: Any) -> AWSResponse | None:
        self.seen += 1
        if self.count is not None and self.seen > self.count:
            return None  # through to moto
        if isinstance(self.fault, Exception):
            raise self.fault
        return self.fault(request)


def s3_error(status: int, body: bytes) -> Any:
    return lambda request: AWSResponse(request.url, status, HeadersDict({"Content-Type": "application/xml"}), _Raw(body))


@pytest.fixture
def botocore_sleeps(monkeypatch: pytest.MonkeyPatch) -> list[float]:
    """botocore's retry backoff, recorded instead of slept."""
    import sys
    import time

    real_sleep = time.sleep
    sleeps: list[float] = []

    def sleep(seconds: float) -> None:
        if sys._getframe(1).f_globals.get("__name__") == "botocore.endpoint":  # a retry's backoff
            sleeps.append(seconds)
        else:
            real_sleep(seconds)

    monkeypatch.setattr(time, "sleep", sleep)
    return sleeps


def big_events(n: int) -> list[dict[str, Any]]:
    return make_events(n, hidden=(1024, 1024))  # about 11 MB of weights: they go through S3


# ---------------------------------------------------------------------------------------------
# S3: the weights and payload path


def test_s3_slowdown_on_the_weights_upload_is_retried_with_backoff(deployed: dict[str, Any],
                                                                   botocore_sleeps: list[float]) -> None:
    backend = make_backend(deployed["config_path"])
    faults = Faults(s3_error(503, S3_SLOWDOWN), count=2)
    backend.s3_client.meta.events.register("before-send.s3.PutObject", faults)
    plane = hooked(backend, lambda actor, attempt: "ok")
    batch = backend.invoke(big_events(2), memory_mb=1769)
    assert [inv.billing.error for inv in batch.invocations] == [None, None]
    assert faults.seen == 3  # two SlowDowns, then the upload that went through
    assert len(botocore_sleeps) == 2 and all(s >= 0 for s in botocore_sleeps)  # backed off between attempts
    key = plane.requests[0]["event"]["weights_s3"]["key"]
    assert boto3.client("s3").head_object(Bucket=deployed["names"]["bucket"], Key=key)["ContentLength"] > 6_000_000


@pytest.mark.parametrize("fault, count, expect", [
    (s3_error(503, S3_SLOWDOWN), None, "SlowDown"),
    (s3_error(403, S3_DENIED), None, "AccessDenied"),
    (EndpointConnectionError(endpoint_url="http://127.0.0.1:9"), None, "Could not connect"),
], ids=["slowdown-forever", "access-denied", "unreachable"])
def test_an_upload_that_keeps_failing_is_a_clear_error(deployed: dict[str, Any], botocore_sleeps: list[float],
                                                       fault: Any, count: int | None, expect: str) -> None:
    backend = make_backend(deployed["config_path"])
    faults = Faults(fault, count)
    backend.s3_client.meta.events.register("before-send.s3.PutObject", faults)
    plane = hooked(backend, lambda actor, attempt: "ok")
    with pytest.raises(UserError) as info:
        backend.invoke(big_events(1), memory_mb=1769)
    message = str(info.value)
    assert expect in message and deployed["names"]["bucket"] in message and "s3:PutObject" in message
    assert "\n" not in message
    assert plane.requests == []  # no function ran without its weights
    # transient faults were retried up to the bound; a denial is not retried
    assert faults.seen == (1 if expect == "AccessDenied" else s3_payload.S3_MAX_ATTEMPTS)


def test_s3_slowdown_when_fetching_an_offloaded_result_is_retried(deployed: dict[str, Any],
                                                                  botocore_sleeps: list[float]) -> None:
    backend = make_backend(deployed["config_path"])
    bucket = deployed["names"]["bucket"]
    key = f"rollouts/trajectories/{backend.run_id}/t.npz"
    s3_payload.put_bytes(bucket, key, _npz_bytes())
    reply = {"actor_id": 0, "trajectories_s3": {"bucket": bucket, "key": key}}
    backend.lambda_client.meta.events.register(
        "before-send.lambda.Invoke",
        lambda request, **_: AWSResponse("https://lambda", 200, HeadersDict({"Content-Type": "application/json"}),
                                         _Raw(json.dumps(reply).encode())))
    faults = Faults(s3_error(503, S3_SLOWDOWN), count=3)
    backend.s3_client.meta.events.register("before-send.s3.GetObject", faults)
    batch = backend.invoke(make_events(1), memory_mb=1769)
    assert batch.invocations[0].billing.error is None and "trajectories_npz_b64" in batch.invocations[0].result
    assert faults.seen == 4 and len(botocore_sleeps) == 3


def _npz_bytes() -> bytes:
    import io

    import numpy as np

    buffer = io.BytesIO()
    np.savez(buffer, obs=np.zeros((2, 4), dtype=np.float32))
    return buffer.getvalue()


def test_the_function_side_client_uses_standard_retries(aws: str) -> None:
    retries = s3_payload.s3_client().meta.config.retries
    assert retries["mode"] == "standard" and retries["total_max_attempts"] == s3_payload.S3_MAX_ATTEMPTS


# ---------------------------------------------------------------------------------------------
# Lambda: 5xx, connection errors, throttling that never clears


class LambdaFaults(FakeLambdaDataPlane):
    """The stand-in data plane of tests.serverless.backends.test_lambda_backend, plus 5xx replies and connection errors."""

    def _reply(self, kind: str, event: dict[str, Any], actor: int, memory: int, version: str) -> AWSResponse:
        url = "https://lambda.us-east-1.amazonaws.com/"
        if kind in ("500", "503"):
            error = {"500": "ServiceException", "503": "ServiceUnavailableException"}[kind]
            headers = HeadersDict({"x-amzn-ErrorType": error, "Content-Type": "application/json"})
            return AWSResponse(url, int(kind), headers, _Raw(json.dumps({"Message": "injected"}).encode()))
        if kind == "502":  # a load balancer's HTML page, no AWS error code
            return AWSResponse(url, 502, HeadersDict({"Content-Type": "text/html"}), _Raw(b"<html>Bad Gateway</html>"))
        if kind == "reset":
            raise ConnectionClosedError(endpoint_url=url)
        if kind == "read-timeout":
            raise ReadTimeoutError(endpoint_url=url)
        if kind == "unreachable":
            raise EndpointConnectionError(endpoint_url=url)
        return super()._reply(kind, event, actor, memory, version)


def lambda_faults(backend: Any, script: Any) -> LambdaFaults:
    client = backend.lambda_client
    client._trainwise_function = backend.config.function_name
    plane = LambdaFaults(client, script)
    plane.install()
    return plane


def test_lambda_5xx_and_connection_errors_are_retried_and_succeed(deployed: dict[str, Any],
                                                                  collector_sleeps: list[float]) -> None:
    script = {0: ["500", "ok"], 1: ["502", "503", "ok"], 2: ["reset", "ok"], 3: ["read-timeout", "ok"],
              4: ["unreachable", "ok"]}
    backend = make_backend(deployed["config_path"])
    plane = lambda_faults(backend, lambda actor, attempt: script[actor][attempt])
    collector, got = collect(backend, 5, backoff_s=0.05)
    assert [r["actor_id"] for r in got.results] == [0, 1, 2, 3, 4]
    assert plane.attempts == {0: 2, 1: 3, 2: 2, 3: 2, 4: 2}  # one request per attempt, no hidden retries
    assert collector.tally.retries == 6 and collector.tally.observed["throttle"] == 6
    ledger = ledger_of(got)
    assert ledger.requests == 5  # the refused attempts ran nothing and are billed nothing
    assert ledger.fault_costs["throttle"] == {"invocations": 6, "gb_seconds": 0.0, "usd": 0.0}
    assert len(collector_sleeps) == 2 and all(0.0 <= s <= 0.1 for s in collector_sleeps)  # jittered, per round


def test_an_endpoint_no_attempt_reaches_is_a_clear_error(deployed: dict[str, Any]) -> None:
    from serverless.rollouts import RolloutsFailed

    backend = make_backend(deployed["config_path"])
    plane = lambda_faults(backend, lambda actor, attempt: "unreachable")
    with pytest.raises(RolloutsFailed, match="cannot reach the Lambda endpoint for region 'us-east-1'") as info:
        collect(backend, 1, max_attempts=3)
    assert "\n" not in str(info.value) and "network" in str(info.value)
    assert plane.attempts == {0: 3}  # retried first, like any connection error


@pytest.mark.parametrize("fault", ["throttle", "503"])
def test_a_fault_that_never_clears_gets_the_slot_bound_of_attempts_not_a_product(deployed: dict[str, Any],
                                                                                  fault: str) -> None:
    """Per slot at most ``RolloutRetryPolicy.max_attempts`` requests (8), hedges included: the
    backend makes one attempt per call, so no second backoff multiplies them (it was 4 x 8)."""
    from serverless.rollouts import RolloutRetryPolicy, RolloutsFailed
    from serverless.trainer import bill_faults

    bound = RolloutRetryPolicy().max_attempts
    backend = make_backend(deployed["config_path"])
    plane = lambda_faults(backend, lambda actor, attempt: fault)
    with pytest.raises(RolloutsFailed, match=f"failed {bound} attempts in a row") as info:
        collect(backend, 4, max_attempts=bound)
    assert plane.attempts == {slot: bound for slot in range(4)}
    assert len(info.value.wasted) == 4 * bound and all(kind == "throttle" for kind, _ in info.value.wasted)
    assert all(bill.billed_ms == 0 and bill.error.startswith("rejected: ") for _, bill in info.value.wasted)
    ledger = ledger_of_faults(info.value.wasted, bill_faults)
    assert ledger.requests == 0 and ledger.total_usd == 0.0  # nothing ran, nothing is billed
    assert ledger.fault_costs["throttle"]["invocations"] == 4 * bound


def ledger_of_faults(wasted: Any, bill_faults: Any) -> Any:
    from serverless.ledger import CostLedger
    from serverless.pricing import PriceTable

    ledger = CostLedger(PriceTable.load())
    bill_faults(ledger, wasted)
    return ledger


def test_one_call_is_one_attempt_per_event_reported_per_invocation(deployed: dict[str, Any]) -> None:
    backend = make_backend(deployed["config_path"])
    plane = lambda_faults(backend, lambda actor, attempt: {0: "ok", 1: "503", 2: "throttle"}[actor])
    batch = backend.invoke(make_events(3), memory_mb=1769, concurrency=3)
    assert plane.attempts == {0: 1, 1: 1, 2: 1}
    assert batch.invocations[0].billing.error is None
    assert batch.invocations[1].billing.error.startswith("rejected: ServiceUnavailableException")
    assert batch.invocations[2].billing.error.startswith("rejected: TooManyRequestsException")
    assert batch.requests == 1 and batch.rejected_attempts == 2
    assert [inv.billing.billed_ms for inv in batch.invocations[1:]] == [0, 0]
    assert any("2 of 3 invocations failed" in note for note in batch.notes)


def test_aws_fixture_ignores_hostile_machine_settings(moto_url: str, monkeypatch: pytest.MonkeyPatch,
                                                      tmp_path: Path, request: pytest.FixtureRequest) -> None:
    """A profile, a role to assume, a web-identity token and a dead proxy on the machine change
    nothing: the fixture clears them, so every call goes to moto with the dummy credentials."""
    for name, value in {"AWS_PROFILE": "production", "AWS_ROLE_ARN": "arn:aws:iam::1:role/x",
                        "AWS_WEB_IDENTITY_TOKEN_FILE": str(tmp_path / "token"), "AWS_SESSION_TOKEN": "stale",
                        "HTTPS_PROXY": "http://127.0.0.1:9", "http_proxy": "http://127.0.0.1:9",
                        "AWS_SHARED_CREDENTIALS_FILE": "/etc/hostname"}.items():
        monkeypatch.setenv(name, value)
    request.getfixturevalue("aws")
    s3 = boto3.client("s3")
    s3.create_bucket(Bucket="isolation-check")
    assert "isolation-check" in [b["Name"] for b in s3.list_buckets()["Buckets"]]
    credentials = boto3.session.Session().get_credentials()
    assert credentials.access_key == "testing" and credentials.token is None
