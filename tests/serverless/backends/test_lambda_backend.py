"""The Lambda backend against moto's server on 127.0.0.1 (no AWS, no Docker).

Control plane, IAM and S3 go to moto's real HTTP server: the role, the bucket and the
function are created under the names the Terraform in infra/terraform/envs/dev computes,
the backend is configured by `trainwise infra output --write` from outputs in the shape of
`terraform output -json`, memory updates go through update-function-configuration and the
`function_updated` waiter, and large weights travel through S3.

moto cannot run the function without Docker. Its docker-free Lambda returns queued
payloads and no log tail; one test drives the invoke path through it end to end. For the
rest, a botocore ``before-send`` hook on the backend's client stands in for Lambda's data
plane: it checks each request, runs the real rollout handler in-process on the request's
payload, and answers the way Lambda does (status, X-Amz-Function-Error, X-Amz-Log-Result
with START/END/REPORT lines, 429 TooManyRequestsException), so retries, timeouts, REPORT
parsing and the trainer's retries of a slot are exercised through botocore's own response parsing.
"""

from __future__ import annotations

import base64
import io
import json
import math
import threading
import time
import uuid
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any, Callable

import boto3
import numpy as np
import pytest
import requests
from botocore.awsrequest import AWSResponse, HeadersDict

from serverless import s3_payload
from serverless.invocation import LAMBDA_SYNC_PAYLOAD_LIMIT_BYTES
from serverless.backends.lambda_backend import LambdaBackend
from serverless.lambda_package import LAMBDA_RUNTIME, build_function_zip
from tests.infra.test_terraform import DEV, dev_names
from trainwise.cli import main as trainwise_main
from core.errors import UserError

REGION = "us-east-1"
TRUST = {
    "Version": "2012-10-17",
    "Statement": [{"Effect": "Allow", "Principal": {"Service": "lambda.amazonaws.com"}, "Action": "sts:AssumeRole"}],
}


# ---------------------------------------------------------------------------------------------
# fixtures: moto's server, credentials, a deployment named like Terraform's


@pytest.fixture(scope="module")
def moto_url(moto_server: str) -> Any:
    """moto's server (tests/conftest.py), its Lambda config put back as it was when done."""
    url = moto_server
    yield url
    requests.post(f"{url}/moto-api/config", json={"lambda": {"use_docker": True}}, timeout=10)


@pytest.fixture
def aws(moto_url: str, monkeypatch: pytest.MonkeyPatch, aws_isolated_env: Path) -> Any:
    monkeypatch.delenv("TRAINWISE_ARTIFACTS_BUCKET", raising=False)
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "testing")  # dummy credentials for moto
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "testing")
    monkeypatch.setenv("AWS_DEFAULT_REGION", REGION)
    monkeypatch.setenv("AWS_REGION", REGION)
    monkeypatch.setenv("AWS_ENDPOINT_URL", moto_url)
    requests.post(f"{moto_url}/moto-api/reset", timeout=10)
    requests.post(f"{moto_url}/moto-api/config", json={"lambda": {"use_docker": False}}, timeout=10)
    s3_payload.reset_client()
    yield moto_url
    s3_payload.reset_client()


@pytest.fixture
def deployed(aws: str, tmp_path: Path) -> dict[str, Any]:
    """Create role, bucket and function as envs/dev names them; write the backend config via the CLI."""
    names = dev_names(REGION)
    role = boto3.client("iam").create_role(RoleName=names["role_name"], AssumeRolePolicyDocument=json.dumps(TRUST))
    boto3.client("s3").create_bucket(Bucket=names["bucket"])
    package = build_function_zip(tmp_path / "rollout.zip")
    client = boto3.client("lambda")
    function = client.create_function(
        FunctionName=names["function_name"],
        Runtime=LAMBDA_RUNTIME,
        Role=role["Role"]["Arn"],
        Handler=str(package["handler"]),
        Code={"ZipFile": (tmp_path / "rollout.zip").read_bytes()},
        MemorySize=names["memory_mb"],
        Timeout=names["timeout_s"],
        Architectures=[names["architecture"]],
        Environment={"Variables": {"TRAINWISE_ARTIFACTS_BUCKET": names["bucket"],
                                   "TRAINWISE_S3_PREFIX": names["s3_prefix"]}},
    )
    client.put_function_concurrency(FunctionName=names["function_name"],
                                    ReservedConcurrentExecutions=names["reserved_concurrency"])
    # `terraform output -json` of this deployment is the checked-in example, whose names
    # tests/infra/test_terraform.py ties to the Terraform source.
    config_path = tmp_path / "aws.json"
    assert trainwise_main(["infra", "output", "--from-json", str(DEV / "outputs.example.json"),
                           "--write", str(config_path)]) == 0
    return {"names": names, "function": function, "config_path": config_path}


def make_backend(config_path: Path) -> LambdaBackend:
    return LambdaBackend.from_config_file(config_path, waiter_delay_s=1)


# ---------------------------------------------------------------------------------------------
# events with real policy weights


def cartpole_weights(hidden: tuple[int, ...], seed: int = 0) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(seed)
    arrays: dict[str, np.ndarray] = {}
    for head, out in (("actor", 2), ("critic", 1)):
        sizes = (4, *hidden, out)
        for i in range(len(sizes) - 1):
            arrays[f"{head}.{i}.w"] = (rng.standard_normal((sizes[i], sizes[i + 1])) * 0.1).astype(np.float32)
            arrays[f"{head}.{i}.b"] = np.zeros(sizes[i + 1], dtype=np.float32)
    return arrays


def make_events(n: int, hidden: tuple[int, ...] = (16, 16), num_steps: int = 32) -> list[dict[str, Any]]:
    from serverless.policy import encode_b64

    weights = encode_b64(cartpole_weights(hidden))
    spec = {"obs_dim": 4, "action_kind": "discrete", "act_dim": 2, "hidden": list(hidden)}
    return [{"env_id": "CartPole-v1", "num_steps": num_steps, "seed": 100 + i, "policy_spec": spec,
             "actor_id": i, "weights_npz_b64": weights} for i in range(n)]


# ---------------------------------------------------------------------------------------------
# a stand-in for Lambda's data plane, hooked into botocore's before-send


class _Raw:
    """Enough of urllib3's response for botocore: read() for streaming bodies, stream() for errors."""

    def __init__(self, body: bytes) -> None:
        self._buf = io.BytesIO(body)

    def read(self, amt: int | None = None) -> bytes:
        return self._buf.read() if amt is None else self._buf.read(amt)

    def stream(self, amt: int = 1024, decode_content: bool = False) -> Any:
        while chunk := self._buf.read(amt):
            yield chunk


def report_line(request_id: str, duration_ms: float, billed_ms: int, memory_mb: int, max_used_mb: int,
                init_ms: float | None = None, status: str | None = None) -> str:
    """A REPORT line exactly as Lambda's plain-text log format prints it (tab separated)."""
    fields = [f"REPORT RequestId: {request_id}", f"Duration: {duration_ms:.2f} ms", f"Billed Duration: {billed_ms} ms",
              f"Memory Size: {memory_mb} MB", f"Max Memory Used: {max_used_mb} MB"]
    if init_ms is not None:
        fields.append(f"Init Duration: {init_ms:.2f} ms")
    if status is not None:
        fields.append(f"Status: {status}")
    return "\t".join(fields) + "\t"


class FakeLambdaDataPlane:
    """Answers lambda:Invoke like Lambda does; ``script(actor_id, attempt)`` picks the reply kind.

    Kinds: "ok" (run the real handler), "throttle" (429), "error" (unhandled exception),
    "timeout" (Sandbox.Timedout with a ``Status: timeout`` REPORT).
    """

    def __init__(self, lambda_client: Any, script: Callable[[int, int], str]) -> None:
        self.lambda_client = lambda_client
        self.script = script
        self.lock = threading.Lock()
        self.requests: list[dict[str, Any]] = []
        self.attempts: dict[int, int] = {}
        self.in_flight = 0
        self.max_in_flight = 0
        self.warm: set[int] = set()
        self.operations: set[str] = set()  # every Lambda API operation the client called

    def install(self) -> None:
        self.lambda_client.meta.events.register("before-send.lambda.Invoke", self)
        self.lambda_client.meta.events.register("before-call.lambda.*",
                                                lambda model, **_: self.operations.add(model.name))

    def __call__(self, request: Any, **_: Any) -> AWSResponse:
        body = request.body if isinstance(request.body, bytes) else request.body.read()
        event = json.loads(body)
        actor = int(event["actor_id"])
        with self.lock:
            attempt = self.attempts.get(actor, 0)
            self.attempts[actor] = attempt + 1
            self.requests.append({"url": request.url, "headers": {k: v.decode() if isinstance(v, bytes) else v
                                                                for k, v in request.headers.items()}, "size": len(body),
                                  "event": event})
            self.in_flight += 1
            self.max_in_flight = max(self.max_in_flight, self.in_flight)
        try:
            kind = self.script(actor, attempt)
            # Memory Size in REPORT is the invoked version's configuration (read from moto).
            configuration = self._configuration(_qualifier(request.url))
            return self._reply(kind, event, actor, int(configuration["MemorySize"]), str(configuration["Version"]))
        finally:
            time.sleep(0.01)  # let concurrent calls overlap so in-flight counts mean something
            with self.lock:
                self.in_flight -= 1

    def _configuration(self, qualifier: str | None) -> dict[str, Any]:
        # Use a plain client: the hooked one would recurse into this stand-in only for Invoke anyway.
        extra = {} if qualifier is None else {"Qualifier": qualifier}
        return boto3.client("lambda").get_function_configuration(
            FunctionName=self.lambda_client._trainwise_function, **extra)

    def _reply(self, kind: str, event: dict[str, Any], actor: int, memory: int, version: str) -> AWSResponse:
        request_id = str(uuid.uuid4())
        url = "https://lambda.us-east-1.amazonaws.com/"
        if kind == "throttle":
            payload = {"Reason": "ReservedFunctionConcurrentInvocationLimitExceeded", "Type": "User",
                       "message": "Rate Exceeded."}
            headers = HeadersDict({"x-amzn-ErrorType": "TooManyRequestsException", "x-amzn-RequestId": request_id,
                                   "Content-Type": "application/json"})
            return AWSResponse(url, 429, headers, _Raw(json.dumps(payload).encode()))
        init_ms = None if actor in self.warm else 231.87
        self.warm.add(actor)
        headers = HeadersDict({"x-amzn-RequestId": request_id, "X-Amz-Executed-Version": version,
                               "Content-Type": "application/json"})
        log = [f"START RequestId: {request_id} Version: {version}"]
        if kind == "ok":
            from serverless.handler import handler

            started = time.perf_counter()
            result = handler(event, None)
            duration = round((time.perf_counter() - started) * 1000.0, 2)
            payload_bytes = json.dumps(result).encode()
            log.append(report_line(request_id, duration, math.ceil(duration), memory, 93, init_ms))
        elif kind == "error":
            headers["X-Amz-Function-Error"] = "Unhandled"
            payload_bytes = json.dumps({"errorMessage": "injected failure", "errorType": "ValueError",
                                        "requestId": request_id, "stackTrace": ["  File ..."]}).encode()
            log.append("[ERROR] ValueError: injected failure")
            log.append(report_line(request_id, 12.41, 13, memory, 90, init_ms))
        elif kind == "timeout":
            headers["X-Amz-Function-Error"] = "Unhandled"
            payload_bytes = json.dumps({"errorType": "Sandbox.Timedout", "errorMessage":
                                        f"RequestId: {request_id} Error: Task timed out after 3.00 seconds"}).encode()
            log.append(report_line(request_id, 3000.00, 3000, memory, 91, init_ms, status="timeout"))
        else:
            raise AssertionError(kind)
        log.append(f"END RequestId: {request_id}")
        headers["X-Amz-Log-Result"] = base64.b64encode("\n".join(log).encode()).decode()
        return AWSResponse(url, 200, headers, _Raw(payload_bytes))


def _qualifier(url: str) -> str | None:
    """The ``Qualifier`` an Invoke request names (an alias or a version), or None."""
    from urllib.parse import parse_qs, urlsplit

    return parse_qs(urlsplit(url).query).get("Qualifier", [None])[0]


def hooked(backend: LambdaBackend, script: Callable[[int, int], str]) -> FakeLambdaDataPlane:
    client = backend.lambda_client
    client._trainwise_function = backend.config.function_name
    plane = FakeLambdaDataPlane(client, script)
    plane.install()
    return plane


def stand_in_for_every_backend(monkeypatch: pytest.MonkeyPatch) -> list[FakeLambdaDataPlane]:
    """Install the stand-in data plane (every invoke "ok") on the Lambda client of every
    backend built from now on, wherever it is built (the trainer, the tuner, a flow's task);
    returns the stand-ins, one per client, in the order the clients were made."""
    from serverless.handler import reset_warm_state

    reset_warm_state()
    planes: list[FakeLambdaDataPlane] = []
    original = LambdaBackend.lambda_client

    def hooked_client(self: LambdaBackend) -> Any:
        client = original.fget(self)
        if not getattr(client, "_trainwise_hooked", False):
            client._trainwise_function = self.config.function_name
            client._trainwise_hooked = True
            planes.append(FakeLambdaDataPlane(client, lambda actor, attempt: "ok"))
            planes[-1].install()
        return client

    monkeypatch.setattr(LambdaBackend, "lambda_client", property(hooked_client))
    return planes


def trajectories(result: dict[str, Any]) -> dict[str, np.ndarray]:
    with np.load(io.BytesIO(base64.b64decode(result["trajectories_npz_b64"])), allow_pickle=False) as z:
        return {k: z[k] for k in z.files}


# ---------------------------------------------------------------------------------------------
# control plane


def test_deployment_uses_terraform_names_and_config_matches(deployed: dict[str, Any]) -> None:
    names = deployed["names"]
    config = json.loads(deployed["config_path"].read_text())
    assert config["function_name"] == names["function_name"] == deployed["function"]["FunctionName"]
    assert config["function_arn"] == deployed["function"]["FunctionArn"]  # same account and region as moto
    assert config["bucket"] == names["bucket"]
    assert config["region"] == REGION and config["s3_prefix"] == names["s3_prefix"]
    role = boto3.client("iam").get_role(RoleName=names["role_name"])["Role"]
    assert deployed["function"]["Role"] == role["Arn"]
    backend = make_backend(deployed["config_path"])
    configuration = backend.check()
    assert configuration["MemorySize"] == names["memory_mb"]


def test_each_memory_size_is_a_published_version_behind_an_alias(deployed: dict[str, Any]) -> None:
    backend = make_backend(deployed["config_path"])
    calls: list[str] = []
    backend.lambda_client.meta.events.register("before-call.lambda.*", lambda model, **_: calls.append(model.name))
    name = deployed["names"]["function_name"]
    lam = boto3.client("lambda")
    assert backend.alias_for(3008) == "trainwise-3008mb"
    alias = lam.get_alias(FunctionName=name, Name="trainwise-3008mb")
    version = lam.get_function_configuration(FunctionName=name, Qualifier=alias["FunctionVersion"])
    assert version["MemorySize"] == 3008 and version["Version"] != "$LATEST"
    # update -> wait (the waiter polled) -> publish -> wait for the version -> alias
    update = calls.index("UpdateFunctionConfiguration")
    publish = calls.index("PublishVersion", update)
    assert "GetFunctionConfiguration" in calls[update + 1:publish]
    assert calls.index("CreateAlias", publish) > publish
    described = lam.get_function_configuration(FunctionName=name)
    assert described["LastUpdateStatus"] == "Successful"
    calls.clear()
    assert backend.alias_for(3008) == "trainwise-3008mb" and calls == []  # known this session: no request
    assert backend.alias_for(1024) == "trainwise-1024mb"
    other = lam.get_alias(FunctionName=name, Name="trainwise-1024mb")["FunctionVersion"]
    assert other != alias["FunctionVersion"]
    assert lam.get_function_configuration(FunctionName=name, Qualifier="trainwise-3008mb")["MemorySize"] == 3008
    with pytest.raises(UserError, match="128-10240"):
        backend.alias_for(64)


def test_an_alias_from_an_earlier_run_is_reused_until_the_deployment_changes(deployed: dict[str, Any]) -> None:
    name = deployed["names"]["function_name"]
    lam = boto3.client("lambda")
    make_backend(deployed["config_path"]).alias_for(2048)
    first = lam.get_alias(FunctionName=name, Name="trainwise-2048mb")["FunctionVersion"]
    calls: list[str] = []
    again = make_backend(deployed["config_path"])
    again.lambda_client.meta.events.register("before-call.lambda.*", lambda model, **_: calls.append(model.name))
    again.alias_for(2048)
    assert "PublishVersion" not in calls and "GetAlias" in calls  # looked up and reused
    # A new environment on $LATEST: the old version no longer runs this deployment.
    lam.update_function_configuration(FunctionName=name, Environment={"Variables": {"TRAINWISE_S3_PREFIX": "other"}})
    make_backend(deployed["config_path"]).alias_for(2048)
    moved = lam.get_alias(FunctionName=name, Name="trainwise-2048mb")["FunctionVersion"]
    assert moved != first
    assert lam.get_function_configuration(FunctionName=name, Qualifier=moved)["Environment"]["Variables"] == {
        "TRAINWISE_S3_PREFIX": "other"}


def test_sizes_asked_for_at_once_are_published_one_after_the_other(deployed: dict[str, Any]) -> None:
    backend = make_backend(deployed["config_path"])
    sizes = [512, 1024, 1769, 3008]
    with ThreadPoolExecutor(max_workers=4) as pool:
        aliases = list(pool.map(backend.alias_for, sizes))
    lam = boto3.client("lambda")
    name = deployed["names"]["function_name"]
    for size, alias in zip(sizes, aliases):
        assert lam.get_function_configuration(FunctionName=name, Qualifier=alias)["MemorySize"] == size


def test_a_denied_publish_names_the_caller_policy(deployed: dict[str, Any]) -> None:
    backend = make_backend(deployed["config_path"])

    def denied(request: Any, **_: Any) -> AWSResponse:  # what Lambda answers an identity without the action
        headers = HeadersDict({"x-amzn-ErrorType": "AccessDeniedException", "Content-Type": "application/json"})
        return AWSResponse(request.url, 403, headers, _Raw(json.dumps({"Message": "not authorized"}).encode()))

    backend.lambda_client.meta.events.register("before-send.lambda.PublishVersion", denied)
    with pytest.raises(UserError, match="may not call lambda:PublishVersion.*rollout_caller_policy_arn"):
        backend.alias_for(512)


def test_failed_memory_update_is_reported(deployed: dict[str, Any]) -> None:
    backend = make_backend(deployed["config_path"])
    backend.check()

    def update_failed(parsed: dict[str, Any], **_: Any) -> None:  # what Lambda reports for a failed update
        parsed["LastUpdateStatus"] = "Failed"
        parsed["LastUpdateStatusReason"] = "The function could not be updated: EniLimitExceeded"

    backend.lambda_client.meta.events.register("after-call.lambda.GetFunctionConfiguration", update_failed)
    with pytest.raises(UserError, match="did not become active.*Failed.*EniLimitExceeded"):
        backend.alias_for(4096)


# ---------------------------------------------------------------------------------------------
# payloads through S3


def test_small_weights_stay_inline_large_ones_go_through_s3(deployed: dict[str, Any]) -> None:
    from serverless.handler import handler

    backend = make_backend(deployed["config_path"])
    small = make_events(1)[0]
    assert json.loads(backend.prepare_payload(small))["weights_npz_b64"] == small["weights_npz_b64"]

    big = make_events(1, hidden=(1024, 1024), num_steps=4)[0]
    weights = base64.b64decode(big["weights_npz_b64"])
    assert len(json.dumps(big)) > LAMBDA_SYNC_PAYLOAD_LIMIT_BYTES  # really over the 6 MB limit
    sent = backend.prepare_payload(big)
    assert len(sent) < 4096
    event = json.loads(sent)
    assert "weights_npz_b64" not in event
    ref = event["weights_s3"]
    assert ref["bucket"] == deployed["names"]["bucket"]
    assert ref["key"].startswith(f"{deployed['names']['s3_prefix']}/weights/")
    assert boto3.client("s3").get_object(Bucket=ref["bucket"], Key=ref["key"])["Body"].read() == weights
    # The function side reads them back with s3_payload (the handler's own path), from moto.
    assert s3_payload.get_bytes(ref["bucket"], ref["key"]) == weights
    result = handler(event, None)
    assert result["env_steps"] == 4 and trajectories(result)["obs"].shape == (4, 4)
    # A second batch with the same weights does not upload again (content-addressed).
    uploads: list[str] = []
    backend.s3_client.meta.events.register("before-call.s3.PutObject", lambda **_: uploads.append("put"))
    assert json.loads(backend.prepare_payload(big))["weights_s3"] == ref
    assert uploads == []


_RUN_EVENT_FROM_ZIP = r"""
import json, sys
zip_path, site_packages = sys.argv[1], sys.argv[2]
sys.path[:] = [zip_path, site_packages] + [p for p in sys.path if "site-packages" not in p and p not in ("", ".")]
import serverless.handler as handler_module
result = handler_module.handler(json.loads(sys.stdin.read()), None)
print(json.dumps({"file": handler_module.__file__, "env_steps": result["env_steps"],
                  "modules": sorted(m for m in sys.modules if m.startswith("serverless"))}))
"""


def test_the_zip_alone_runs_an_event_whose_weights_are_in_s3(deployed: dict[str, Any], tmp_path: Path) -> None:
    """What Lambda does with the deployed zip: import the handler from it, fetch weights from S3."""
    import subprocess
    import sys
    import sysconfig

    backend = make_backend(deployed["config_path"])
    backend.payload_limit_bytes = 1_000  # force the S3 path for these small weights
    event = json.loads(backend.prepare_payload(make_events(1, num_steps=8)[0]))
    assert "weights_s3" in event
    zip_path = tmp_path / "rollout.zip"
    build_function_zip(zip_path)
    proc = subprocess.run([sys.executable, "-S", "-c", _RUN_EVENT_FROM_ZIP, str(zip_path),
                           sysconfig.get_paths()["purelib"]], input=json.dumps(event), capture_output=True,
                          text=True, cwd=tmp_path, timeout=120)
    assert proc.returncode == 0, proc.stderr[-3000:]
    out = json.loads(proc.stdout.strip().splitlines()[-1])
    assert out["file"].startswith(str(zip_path)) and out["env_steps"] == 8
    assert "serverless.s3_payload" in out["modules"]


def test_large_results_are_offloaded_and_fetched_back(deployed: dict[str, Any]) -> None:
    from serverless.handler import handler

    names = deployed["names"]
    event = make_events(1, num_steps=200)[0]
    result = handler(event, None)
    inline = s3_payload.maybe_offload_result(result, names["bucket"], names["s3_prefix"])
    assert inline is result  # a normal segment fits the 6 MB response
    backend = make_backend(deployed["config_path"])
    offloaded = s3_payload.maybe_offload_result(result, names["bucket"], names["s3_prefix"], limit_bytes=70_000,
                                                run_id=backend.run_id)
    assert "trajectories_npz_b64" not in offloaded
    key = offloaded["trajectories_s3"]["key"]
    assert key.startswith(f"{names['s3_prefix']}/trajectories/{backend.run_id}/")  # this run's own folder
    decoded = backend.decode_result(json.dumps(offloaded).encode())
    assert decoded["trajectories_npz_b64"] == result["trajectories_npz_b64"]
    listed = boto3.client("s3").list_objects_v2(Bucket=names["bucket"], Prefix=f"{names['s3_prefix']}/trajectories/")
    assert listed.get("KeyCount", 0) == 0  # read once, then deleted
    with pytest.raises(ValueError, match="no artifacts bucket"):
        s3_payload.maybe_offload_result(result, None, limit_bytes=70_000)


def test_pickled_trajectories_are_refused(deployed: dict[str, Any]) -> None:
    names = deployed["names"]
    buf = io.BytesIO()
    np.savez(buf, obs=np.array([{"not": "data"}], dtype=object))
    backend = make_backend(deployed["config_path"])
    key = f"{names['s3_prefix']}/trajectories/{backend.run_id}/evil.npz"
    boto3.client("s3").put_object(Bucket=names["bucket"], Key=key, Body=buf.getvalue())
    with pytest.raises(ValueError, match="pickle-free"):
        backend.decode_result(json.dumps({"trajectories_s3": {"bucket": names["bucket"], "key": key}}).encode())


@pytest.mark.parametrize("ref", [
    {"bucket": "another-bucket", "key": "rollouts/trajectories/{run}/t.npz"},
    {"bucket": "{bucket}", "key": "rollouts/trajectories/0123456789abcdef0123456789abcdef/t.npz"},  # another run's
    {"bucket": "{bucket}", "key": "rollouts/trajectories/t.npz"},  # no run
    {"bucket": "{bucket}", "key": "profiles/seraph-x.json"},
    {"bucket": "{bucket}", "key": "rollouts/trajectories/../../wheels/trainwise.whl"},
    {"bucket": "{bucket}", "key": "rollouts/weights/abc.npz"},
    {"bucket": "{bucket}", "key": "rollouts/trajectories/t.npz", "extra": 1},
    "rollouts/trajectories/t.npz",
])
def test_a_result_naming_an_object_outside_the_runs_trajectories_deletes_nothing(deployed: dict[str, Any], ref: Any) -> None:
    """The learner reads and deletes what a function's response names: only its own trajectories."""
    names = deployed["names"]
    s3 = boto3.client("s3")
    s3.put_object(Bucket=names["bucket"], Key="profiles/seraph-x.json", Body=b"{}")
    if isinstance(ref, dict):
        ref = {k: (v.replace("{bucket}", names["bucket"]) if isinstance(v, str) else v) for k, v in ref.items()}
        ref = {**ref, "key": ref["key"].replace("rollouts/", f"{names['s3_prefix']}/", 1)} if names["s3_prefix"] != "rollouts" else ref
    backend = make_backend(deployed["config_path"])
    if isinstance(ref, dict):
        ref = {**ref, "key": ref["key"].replace("{run}", backend.run_id)}
    with pytest.raises(ValueError, match="trajectories_s3"):
        backend.decode_result(json.dumps({"trajectories_s3": ref}).encode())
    assert s3.get_object(Bucket=names["bucket"], Key="profiles/seraph-x.json")["Body"].read() == b"{}"


# ---------------------------------------------------------------------------------------------
# the invoke path


def test_invoke_round_trip_through_moto(deployed: dict[str, Any]) -> None:
    """moto's docker-free Lambda returns queued payloads: queue real handler results, invoke over HTTP."""
    from serverless.handler import handler, reset_warm_state

    reset_warm_state()
    events = make_events(3)
    results = [json.dumps(handler(e, None)) for e in events]
    reset_warm_state()
    response = requests.post(f"{deployed_url(deployed)}/moto-api/static/lambda-simple/response",
                             json={"results": results, "region": REGION}, timeout=10)
    assert response.status_code == 201
    backend = make_backend(deployed["config_path"])
    batch = backend.invoke(events, memory_mb=2048, concurrency=1)
    assert [inv.billing.error for inv in batch.invocations] == [None, None, None]
    assert [inv.result["actor_id"] for inv in batch.invocations] == [0, 1, 2]
    for inv in batch.invocations:
        assert trajectories(inv.result)["obs"].shape == (32, 4)
        # moto sends no log tail, so there is no REPORT: the figure is measured, never called billed.
        assert inv.billing.label == "measured"
    assert batch.requests == 3 and batch.rejected_attempts == 0
    assert boto3.client("lambda").get_function_configuration(
        FunctionName=deployed["names"]["function_name"])["MemorySize"] == 2048


def deployed_url(deployed: dict[str, Any]) -> str:
    import os

    return os.environ["AWS_ENDPOINT_URL"]


def test_invoke_sends_tail_requests_and_records_billed_report_figures(deployed: dict[str, Any]) -> None:
    from serverless.handler import reset_warm_state

    reset_warm_state()
    backend = make_backend(deployed["config_path"])
    plane = hooked(backend, lambda actor, attempt: "ok")
    events = make_events(4)
    batch = backend.invoke(events, memory_mb=1024, concurrency=2)
    assert len(plane.requests) == 4 and plane.max_in_flight <= 2
    for request in plane.requests:
        assert request["url"].endswith(f"/2015-03-31/functions/{deployed['names']['function_name']}/invocations"
                                       "?Qualifier=trainwise-1024mb")
        assert request["headers"]["X-Amz-Invocation-Type"] == "RequestResponse"
        assert request["headers"]["X-Amz-Log-Type"] == "Tail"
        assert "weights_npz_b64" in request["event"] and request["size"] < LAMBDA_SYNC_PAYLOAD_LIMIT_BYTES
    for event, inv in zip(events, batch.invocations):
        assert inv.billing.error is None and inv.result["actor_id"] == event["actor_id"]
        assert inv.billing.label == "billed"
        assert inv.billing.memory_mb == 1024  # REPORT's Memory Size: the version behind the alias
        assert inv.billing.billed_ms == math.ceil(inv.billing.duration_ms)
        assert inv.billing.cold_start and inv.billing.init_ms == pytest.approx(231.87)
        assert inv.billing.max_memory_used_mb == 93
    again = backend.invoke(events[:1], memory_mb=1024)
    assert not again.invocations[0].billing.cold_start and again.invocations[0].billing.init_ms == 0.0


def collect(backend: LambdaBackend, n: int, max_attempts: int = 4, backoff_s: float = 0.0) -> tuple[Any, Any]:
    """One iteration of ``n`` slots through the trainer's collector (the one retry policy of a
    Lambda call): the collector and what it collected."""
    from serverless.rollouts import RolloutCollector, RolloutRetryPolicy

    policy = RolloutRetryPolicy(max_attempts=max_attempts, backoff_s=backoff_s, backoff_cap_s=max(backoff_s, 0.4))
    collector = RolloutCollector(backend, policy, hedge=False)
    return collector, collector.collect(make_events(n), 1769, n, iteration=1)


@pytest.fixture
def collector_sleeps(monkeypatch: pytest.MonkeyPatch) -> list[float]:
    """The collector's backoffs between retry rounds, recorded instead of slept."""
    import types

    import serverless.rollouts

    sleeps: list[float] = []
    monkeypatch.setattr(serverless.rollouts, "time", types.SimpleNamespace(perf_counter=time.perf_counter,
                                                                            sleep=sleeps.append))
    return sleeps


def ledger_of(got: Any) -> Any:
    from serverless.ledger import CostLedger
    from serverless.pricing import PriceTable
    from serverless.trainer import bill_rollouts

    ledger = CostLedger(PriceTable.load())
    bill_rollouts(ledger, got, [])
    return ledger


def test_throttles_and_timeouts_are_retried_by_the_collector_one_attempt_per_call(
        deployed: dict[str, Any], collector_sleeps: list[float]) -> None:
    script = {0: ["throttle", "throttle", "ok"], 1: ["timeout", "ok"], 2: ["ok"]}
    backend = make_backend(deployed["config_path"])
    plane = hooked(backend, lambda actor, attempt: script[actor][attempt])
    collector, got = collect(backend, 3, backoff_s=0.05)
    assert plane.attempts == {0: 3, 1: 2, 2: 1}  # one request per attempt: botocore retries nothing
    assert [r["actor_id"] for r in got.results] == [0, 1, 2] and got.used_ids == [(1, 0, 2), (1, 1, 1), (1, 2, 0)]
    tally = collector.tally
    assert tally.retries == 3 and tally.observed["throttle"] == 2 and tally.observed["timeouts"] == 1
    assert sorted(kind for kind, _ in got.wasted) == ["throttle", "throttle", "timeouts"]
    timed_out = next(bill for kind, bill in got.wasted if kind == "timeouts")
    assert timed_out.label == "billed" and timed_out.billed_ms == 3000 and "Sandbox.Timedout" in timed_out.error
    ledger = ledger_of(got)
    assert ledger.requests == 4  # three used and the timed-out attempt; the 429s ran nothing
    assert ledger.fault_costs["throttle"] == {"invocations": 2, "gb_seconds": 0.0, "usd": 0.0}
    assert ledger.fault_costs["timeouts"]["invocations"] == 1 and ledger.fault_costs["timeouts"]["usd"] > 0
    # the collector's full-jitter backoff before each retry round: uniform in [0, 0.05 * 2^(k-1)]
    assert len(collector_sleeps) == 2 and 0.0 <= collector_sleeps[0] <= 0.05 and 0.0 <= collector_sleeps[1] <= 0.1


def test_a_slot_that_keeps_failing_stops_at_the_bound_without_re_running_the_others(deployed: dict[str, Any]) -> None:
    from serverless.rollouts import RolloutsFailed

    backend = make_backend(deployed["config_path"])
    plane = hooked(backend, lambda actor, attempt: "error" if actor == 2 else "ok")
    with pytest.raises(RolloutsFailed, match="slot 2 of iteration 1 failed 3 attempts in a row") as info:
        collect(backend, 4, max_attempts=3)
    assert plane.attempts == {0: 1, 1: 1, 2: 3, 3: 1}  # successes were not re-run
    failed = [bill for kind, bill in info.value.wasted if kind == "errors"]
    assert len(failed) == 3 and all(b.label == "billed" and b.billed_ms == 13 for b in failed)  # each ran and is paid


def test_malformed_result_is_an_error_not_a_crash(deployed: dict[str, Any]) -> None:
    backend = make_backend(deployed["config_path"])
    client = backend.lambda_client

    def bad_payload(request: Any, **_: Any) -> AWSResponse:
        return AWSResponse("https://lambda", 200, HeadersDict({"Content-Type": "application/json"}),
                           _Raw(json.dumps({"trajectories_npz_b64": base64.b64encode(b"not a zip").decode()}).encode()))

    client.meta.events.register("before-send.lambda.Invoke", bad_payload)
    batch = backend.invoke(make_events(1), memory_mb=1769)
    assert batch.invocations[0].result is None
    assert "malformed result" in batch.invocations[0].billing.error
    assert batch.requests == 1 and batch.rejected_attempts == 0  # one attempt: the backend never retries


def test_offloaded_result_that_cannot_be_fetched_is_retried(deployed: dict[str, Any]) -> None:
    from serverless.rollouts import RolloutsFailed

    backend = make_backend(deployed["config_path"])
    missing = {"trajectories_s3": {"bucket": deployed["names"]["bucket"],
                                   "key": f"rollouts/trajectories/{backend.run_id}/gone.npz"}}
    calls: list[int] = []

    def dangling_reference(request: Any, **_: Any) -> AWSResponse:
        calls.append(1)
        return AWSResponse("https://lambda", 200, HeadersDict({"Content-Type": "application/json"}),
                           _Raw(json.dumps(missing).encode()))

    backend.lambda_client.meta.events.register("before-send.lambda.Invoke", dangling_reference)
    batch = backend.invoke(make_events(1), memory_mb=1769)
    assert "result not fetched from S3" in batch.invocations[0].billing.error and len(calls) == 1
    with pytest.raises(RolloutsFailed, match="result not fetched from S3"):
        collect(backend, 1, max_attempts=2)
    assert len(calls) == 3  # the collector retried it: the function may write it again


# ---------------------------------------------------------------------------------------------
# clear messages for configuration errors


def test_missing_function_says_which_and_how_to_fix(deployed: dict[str, Any], tmp_path: Path) -> None:
    config = json.loads(deployed["config_path"].read_text())
    config["function_name"] = "trainwise-dev-nothing-here"
    config.pop("function_arn")
    path = tmp_path / "missing.json"
    path.write_text(json.dumps(config))
    with pytest.raises(UserError) as info:
        make_backend(path).invoke(make_events(1), memory_mb=1769)
    message = str(info.value)
    assert "trainwise-dev-nothing-here" in message and "us-east-1" in message
    assert "trainwise infra apply" in message and "Traceback" not in message


def test_wrong_region_is_named(deployed: dict[str, Any], tmp_path: Path) -> None:
    config = json.loads(deployed["config_path"].read_text())
    config["region"] = "eu-west-1"
    path = tmp_path / "wrong-region.json"
    path.write_text(json.dumps(config))
    with pytest.raises(UserError, match="eu-west-1.*us-east-1"):
        make_backend(path)
    config.pop("function_arn")  # no ARN to compare with: the lookup in eu-west-1 fails instead
    path.write_text(json.dumps(config))
    with pytest.raises(UserError, match="not found in region 'eu-west-1'"):
        make_backend(path).check()
    config["region"] = "us-east1"  # a typo
    path.write_text(json.dumps(config))
    with pytest.raises(UserError, match="'us-east1' is not an AWS region name"):
        make_backend(path)


def test_missing_credentials_say_how_to_set_them(deployed: dict[str, Any], monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("AWS_ACCESS_KEY_ID")
    monkeypatch.delenv("AWS_SECRET_ACCESS_KEY")
    with pytest.raises(UserError, match="no AWS credentials.*AWS_ACCESS_KEY_ID"):
        make_backend(deployed["config_path"]).invoke(make_events(1), memory_mb=1769)


def test_make_backend_builds_the_lambda_backend(deployed: dict[str, Any]) -> None:
    from serverless.backends import make_backend as factory

    backend = factory("lambda", lambda_config=str(deployed["config_path"]))
    assert isinstance(backend, LambdaBackend) and backend.name == "lambda"
    assert backend.config.reserved_concurrency == deployed["names"]["reserved_concurrency"]
    with pytest.raises(UserError, match="does not exist"):
        factory("lambda", lambda_config=str(deployed["config_path"]) + ".nope")


# ---------------------------------------------------------------------------------------------
# the whole path: `trainwise rl train --backend lambda`


def test_rl_train_with_the_lambda_backend_records_billed_cost(deployed: dict[str, Any], tmp_path: Path,
                                                               monkeypatch: pytest.MonkeyPatch) -> None:
    """The trainer builds the backend from the config file itself; the stand-in data plane is
    installed on whichever Lambda client the backend creates."""
    planes = stand_in_for_every_backend(monkeypatch)
    monkeypatch.chdir(tmp_path)
    out = tmp_path / "train.json"
    code = trainwise_main(["rl", "train", "--env", "CartPole-v1", "--target-reward", "10000", "--max-steps", "256",
                           "--actors", "2", "--batch", "128", "--memory-mb", "2048", "--backend", "lambda",
                           "--lambda-config", str(deployed["config_path"]), "--checkpoint-every", "0",
                           "--no-progress", "--json-out", str(out)])
    assert code == 0
    result = json.loads(out.read_text())
    assert result["env_steps"] >= 256
    assert result["ledger"]["label"] == "billed"
    requests_line = next(line for line in result["ledger"]["lines"] if line["component"] == "requests")
    assert requests_line["quantity"] == len(planes[0].requests) >= 2
    assert boto3.client("lambda").get_function_configuration(
        FunctionName=deployed["names"]["function_name"])["MemorySize"] == 2048
