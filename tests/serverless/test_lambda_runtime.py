"""The function zip under Lambda's real runtime interface client (awslambdaric) against a local
stand-in of the Runtime API, in a fresh interpreter with only the zip's files, the layer's
packages and the runtime client on its path: a rollout answers as the in-process handler does,
and a handler error reaches the Lambda backend as a function error."""

from __future__ import annotations

import base64
import io
import json
import math
import uuid
from pathlib import Path
from typing import Any, Iterator

import numpy as np
import pytest
from botocore.awsrequest import AWSResponse, HeadersDict

from serverless.lambda_package import build_function_zip
from tests.serverless.backends.test_lambda_backend import (FakeLambdaDataPlane, _Raw, aws, deployed,  # noqa: F401
                                                           make_backend, make_events, moto_url, report_line)
from tests.serverless.lambda_runtime_api import LambdaRuntime

pytestmark = pytest.mark.slow  # a fresh interpreter imports numpy and gymnasium under the runtime client


@pytest.fixture(scope="module")
def runtime(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LambdaRuntime]:
    work = tmp_path_factory.mktemp("lambda-runtime")
    build_function_zip(work / "rollout.zip")
    running = LambdaRuntime(work / "rollout.zip", work)
    try:
        yield running
    finally:
        log = running.close()
        print(log[-3000:])


def _arrays(result: dict[str, Any]) -> dict[str, np.ndarray]:
    with np.load(io.BytesIO(base64.b64decode(result["trajectories_npz_b64"])), allow_pickle=False) as z:
        return {k: z[k] for k in z.files}


def _same_rollout(a: dict[str, Any], b: dict[str, Any]) -> None:
    """Equal but for the wall-clock timings (and the npz's zip timestamps: its arrays compare)."""
    plain = lambda r: {k: v for k, v in r.items() if k not in ("timings", "trajectories_npz_b64")}  # noqa: E731
    assert plain(a) == plain(b)
    x, y = _arrays(a), _arrays(b)
    assert x.keys() == y.keys() and all(np.array_equal(x[k], y[k]) for k in x)


def test_a_rollout_under_the_runtime_answers_as_the_handler_in_process(runtime: LambdaRuntime) -> None:
    from serverless.handler import handler, reset_warm_state

    event = make_events(1, num_steps=64)[0]
    outcome = runtime.invoke(event)
    assert outcome.kind == "response", outcome.body[-2000:]
    remote = json.loads(outcome.body)
    reset_warm_state()
    local = handler(json.loads(json.dumps(event)), None)
    assert remote["env_steps"] == 64 and remote["cold_start"] is True
    _same_rollout(remote, local)
    again = json.loads(runtime.invoke(event).body)  # the same process: warm, as a reused Lambda instance
    assert again["cold_start"] is False
    assert local["cold_start"] is True


def test_a_handler_error_is_posted_to_the_runtime_api(runtime: LambdaRuntime) -> None:
    outcome = runtime.invoke({**make_events(1)[0], "env_id": "NoSuchEnv-v0"})
    assert outcome.kind == "error"
    error = json.loads(outcome.body)
    assert error["errorType"] == "NameNotFound" and "NoSuchEnv" in error["errorMessage"] and error["stackTrace"]
    assert runtime.invoke(make_events(1, num_steps=8)[0]).kind == "response"  # the runtime lives on


class RuntimeDataPlane(FakeLambdaDataPlane):
    """Lambda's Invoke answered by the runtime: its response is the payload; its error becomes
    ``X-Amz-Function-Error: Unhandled`` with the error as the payload, as Lambda does."""

    def __init__(self, lambda_client: Any, runtime: LambdaRuntime) -> None:
        super().__init__(lambda_client, lambda actor, attempt: "runtime")
        self.runtime = runtime

    def _reply(self, kind: str, event: dict[str, Any], actor: int, memory: int, version: str) -> AWSResponse:
        outcome = self.runtime.invoke(event)
        request_id = str(uuid.uuid4())
        duration = round(outcome.seconds * 1000.0, 2)
        headers = HeadersDict({"x-amzn-RequestId": request_id, "X-Amz-Executed-Version": version,
                               "Content-Type": "application/json"})
        if outcome.kind == "error":
            headers["X-Amz-Function-Error"] = "Unhandled"
        log = [f"START RequestId: {request_id} Version: {version}",
               report_line(request_id, duration, max(1, math.ceil(duration)), memory, 120), f"END RequestId: {request_id}"]
        headers["X-Amz-Log-Result"] = base64.b64encode("\n".join(log).encode()).decode()
        return AWSResponse("https://lambda.us-east-1.amazonaws.com/", 200, headers, _Raw(outcome.body))


def test_the_backend_gets_the_runtimes_results_and_its_function_errors(runtime: LambdaRuntime,
                                                                       deployed: dict[str, Any]) -> None:  # noqa: F811
    backend = make_backend(deployed["config_path"])
    backend.lambda_client._trainwise_function = backend.config.function_name
    RuntimeDataPlane(backend.lambda_client, runtime).install()
    good, bad = make_events(2)
    bad = {**bad, "env_id": "NoSuchEnv-v0"}
    batch = backend.invoke([good, bad], memory_mb=1769, concurrency=1)
    ok, failed = batch.invocations
    assert ok.billing.error is None and ok.result["env_steps"] == good["num_steps"] and ok.billing.label == "billed"
    assert failed.result is None and failed.billing.error and "NoSuchEnv" in failed.billing.error
