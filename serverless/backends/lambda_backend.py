"""AWS Lambda backend: invoke the deployed rollout function with boto3.

Design choices, each written down because a user would ask:

* **Synchronous invokes in a bounded thread pool.** ``RequestResponse`` returns
  the result and the log tail (with the REPORT record that holds the billed
  duration) in one round trip; a pool of ``concurrency`` threads keeps at most
  that many functions running, which is what the plan asked for. Botocore's own
  retries are switched off so every attempt is seen, counted and billed here.
* **Weights inline when they fit, S3 otherwise.** An event whose JSON exceeds the
  6 MB synchronous limit (less headroom) gets ``weights_s3`` instead of
  ``weights_npz_b64``. Uploads are content-addressed, so a batch uploads once.
* **Results are npz, never pickle.** Trajectories (inline or fetched from S3)
  are opened with ``numpy.load(allow_pickle=False)`` before they are accepted;
  S3-offloaded trajectories come back inline, in the same shape as from the local
  backend, and the S3 object is deleted.
* **Billed figures.** Each invocation's bill comes from its REPORT record
  (:mod:`serverless.lambda_report`), labelled ``billed``. If a response has no
  REPORT (an endpoint that does not send log tails, such as moto's), the record
  holds the client-side round trip, labelled ``measured``, never ``billed``.
* **One published version and alias per memory size** (as AWS Lambda Power Tuning
  does): the first batch at a size sets ``$LATEST``'s memory, waits until the update
  is ``Successful`` (botocore's ``function_updated`` waiter), publishes a version,
  waits until it is active (``published_version_active``) and points the alias
  ``trainwise-<MB>mb`` at it; every invoke names its alias (``Qualifier``). Sizes in
  use at once never race on one configuration, and a sweep never changes the
  function under a running batch. An alias left by an earlier run is reused when its
  version runs at that size with ``$LATEST``'s code and configuration; otherwise it
  moves to a fresh version. Aliases and versions are kept (docs/aws.md says why and
  how to remove them).
* **One attempt per event; the trainer's collector is the one retry policy.** Each event is
  invoked once per call, with botocore's own retries off. Throttling (429), 5xx service
  errors and connection errors come back as that invocation's ``rejected: ...`` error (never
  ran, billed nothing), function errors and timeouts as its billed error; the trainer's
  :class:`serverless.rollouts.RolloutCollector` retries the slot (exponential backoff, full
  jitter, at most ``max_attempts`` attempts per slot, hedges included), gives each attempt its
  own rollout id and books every attempt on the ledger. A retry loop here as well would nest
  under it (up to 32 attempts per slot) and hide attempts from the ledger. S3 (weights,
  offloaded results) uses botocore's standard retry mode, which retries 5xx and SlowDown
  with backoff: no layer above retries those calls.
* **Configuration errors raise** :class:`core.errors.UserError` with what is
  wrong and how to fix it: missing credentials, a missing function, a wrong region.
"""

from __future__ import annotations

import base64
import io
import json
import math
import threading
import time
import uuid
from concurrent.futures import ThreadPoolExecutor, as_completed
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

from serverless import s3_payload
from serverless.invocation import (
    LAMBDA_SYNC_PAYLOAD_LIMIT_BYTES,
    BillingRecord,
    Invocation,
    InvokeBatch,
    check_memory_mb,
)
from serverless.lambda_config import DEFAULT_CONFIG_PATH, LambdaConfig
from serverless.lambda_report import decode_log_result, parse_report
from core.errors import UserError
from core.json_edge import JsonObject
from serverless.rollout_event import RolloutEvent, RolloutReply


_THROTTLE_CODES = {
    "TooManyRequestsException",
    "ThrottlingException",
    "Throttling",
    "EC2ThrottledException",
    "ResourceNotReadyException",
    "ServiceException",
    "ServiceUnavailableException",
    "InternalFailure",
}
_CREDENTIAL_CODES = {
    "UnrecognizedClientException",
    "InvalidSignatureException",
    "ExpiredTokenException",
    "InvalidClientTokenId",
}

#: Aliases this backend creates are named ALIAS_PREFIX + "<MB>mb" (infra/terraform grants
#: InvokeFunction on them only).
ALIAS_PREFIX = "trainwise-"
#: The configuration a published version must share with $LATEST to be reused for its size.
_DEPLOYMENT_FIELDS = ("CodeSha256", "Handler", "Runtime", "Role", "Timeout", "Environment", "Layers",
                      "Architectures", "EphemeralStorage")

HOW_TO_SET_CREDENTIALS = (
    "set AWS_PROFILE to a profile from ~/.aws/config (or run `aws configure`), or export "
    "AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY (plus AWS_SESSION_TOKEN for temporary credentials)"
)


@dataclass
class LambdaInvokeBatch(InvokeBatch):
    """An :class:`InvokeBatch` plus what its attempts were charged for.

    One attempt per event: ``requests`` counts those that ran (each is charged the
    per-request fee), ``rejected_attempts`` those refused with 429/5xx or lost to a
    connection error (they never ran and AWS charges nothing for them)."""

    rejected_attempts: int = 0
    requests: int = 0


class _Rejected(Exception):
    """An attempt refused before it ran (throttle, 5xx, connection): its error text."""


# ---------------------------------------------------------------------------------------------
# Backend


class LambdaBackend:
    """:class:`serverless.invocation.FunctionBackend` on AWS Lambda."""

    name = "lambda"

    def __init__(
        self,
        config: LambdaConfig,
        *,
        payload_limit_bytes: int = LAMBDA_SYNC_PAYLOAD_LIMIT_BYTES,
        config_path: str | Path | None = None,
        waiter_delay_s: int = 2,
    ) -> None:
        self.config = config
        self.payload_limit_bytes = payload_limit_bytes
        self._config_path = str(config_path or DEFAULT_CONFIG_PATH)
        self._waiter_delay_s = waiter_delay_s
        self._lambda: Any = None
        self._s3: Any = None
        self._ready = False
        self._latest: JsonObject = {}  # $LATEST's configuration, as check() read it
        self._memory_mb: int | None = None  # $LATEST's memory size
        self._publish_lock = threading.Lock()
        self._aliases: dict[int, str] = {}  # memory size -> the alias that runs it, this session
        self._pending_notes: list[str] = []  # what alias_for did, for the next batch's notes
        self._weights_keys: dict[str, str] = {}
        # this backend's run: functions put offloaded trajectories under <prefix>/trajectories/<run_id>/,
        # the only objects decode_result reads and deletes
        self.run_id = uuid.uuid4().hex

    @classmethod
    def from_config_file(cls, path: str | Path = DEFAULT_CONFIG_PATH, **kwargs: Any) -> LambdaBackend:
        """Build from the JSON that ``trainwise infra output --write FILE`` produced."""
        return cls(LambdaConfig.from_file(path), config_path=path, **kwargs)

    # -- clients -----------------------------------------------------------------------------

    @property
    def lambda_client(self) -> Any:
        """The boto3 Lambda client: botocore's retries off (one attempt per call; the trainer's
        collector retries a slot, see the module's docstring); read timeout above the function
        timeout."""
        if self._lambda is None:
            import boto3
            from botocore.config import Config

            self._lambda = boto3.session.Session().client(
                "lambda",
                region_name=self.config.region,
                config=Config(
                    retries={"total_max_attempts": 1, "mode": "standard"},
                    read_timeout=self.config.timeout_s + 30,
                    connect_timeout=10,
                    max_pool_connections=max(10, self.config.reserved_concurrency or 64),
                ),
            )
        return self._lambda

    @property
    def s3_client(self) -> Any:
        if self._s3 is None:
            import boto3

            self._s3 = boto3.session.Session().client("s3", region_name=self.config.region,
                                                      config=s3_payload.client_config())
        return self._s3

    # -- checks and errors -------------------------------------------------------------------

    def check(self) -> JsonObject:
        """Fail early, and clearly, on missing credentials, a missing function or a wrong region."""
        import boto3

        if boto3.session.Session().get_credentials() is None:
            raise UserError(f"no AWS credentials found for the Lambda backend: {HOW_TO_SET_CREDENTIALS}")
        configuration = self._call(self.lambda_client.get_function_configuration, "GetFunctionConfiguration",
                                   FunctionName=self.config.function_name)
        self._latest = configuration
        self._memory_mb = int(configuration.get("MemorySize", 0)) or None
        self._ready = True
        return configuration

    def _explain(self, exc: Exception, operation: str) -> UserError | None:
        """A UserError for a configuration problem, or None if ``exc`` is transient/unknown."""
        from botocore.exceptions import (
            EndpointConnectionError,
            NoCredentialsError,
            NoRegionError,
            PartialCredentialsError,
        )

        name, region, cfg = self.config.function_name, self.config.region, self._config_path
        if isinstance(exc, (NoCredentialsError, PartialCredentialsError)):
            return UserError(f"no usable AWS credentials for the Lambda backend ({exc}): {HOW_TO_SET_CREDENTIALS}")
        if isinstance(exc, NoRegionError):
            return UserError(f"no AWS region: set \"region\" in {cfg} or export AWS_REGION")
        if isinstance(exc, EndpointConnectionError):
            return UserError(
                f"cannot reach the Lambda endpoint for region '{region}' ({exc}); check that the region in "
                f"{cfg} is a real AWS region where the function is deployed, and the network"
            )
        code = getattr(exc, "response", {}).get("Error", {}).get("Code", "")
        message = getattr(exc, "response", {}).get("Error", {}).get("Message", str(exc))
        if code == "ResourceNotFoundException":
            return UserError(
                f"Lambda function '{name}' was not found in region '{region}' ({message}). Deploy it with "
                f"`trainwise infra apply` and rewrite {cfg} with `trainwise infra output --write {cfg}`; if it "
                "was deployed in another region, the region in the config is wrong"
            )
        if code in _CREDENTIAL_CODES:
            return UserError(f"AWS rejected the credentials ({code}: {message}): {HOW_TO_SET_CREDENTIALS}")
        if code in ("AccessDeniedException", "AccessDenied"):
            return UserError(
                f"the AWS identity in use may not call lambda:{operation} on '{name}' ({message}); grant it "
                "the caller policy Terraform creates (output rollout_caller_policy_arn): InvokeFunction on the "
                f"function's {ALIAS_PREFIX}* aliases, GetFunctionConfiguration, UpdateFunctionConfiguration, "
                "PublishVersion, GetAlias, CreateAlias and UpdateAlias (docs/aws.md)"
            )
        if code in ("InvalidParameterValueException", "RequestEntityTooLargeException",
                    "InvalidRequestContentException"):
            return UserError(f"Lambda rejected {operation} for '{name}': {code}: {message}")
        return None

    def _call(self, fn: Callable[..., Any], operation: str, **kwargs: Any) -> Any:
        """A control-plane call whose configuration errors become UserErrors."""
        from botocore.exceptions import BotoCoreError, ClientError

        try:
            return fn(**kwargs)
        except (ClientError, BotoCoreError) as exc:
            explained = self._explain(exc, operation)
            if explained is not None:
                raise explained from None
            raise

    # -- memory: one published version and alias per size -----------------------------------

    def alias_for(self, memory_mb: int) -> str:
        """The alias that runs the function at ``memory_mb`` (``trainwise-<MB>mb``).

        The first call for a size looks the alias up and reuses its version when that
        version runs at this size with ``$LATEST``'s code and configuration; otherwise it
        publishes one (:meth:`_publish`) and points the alias at it. Later calls return the
        alias without a request. Publishing holds a lock, so sizes asked for at once from
        several threads are published one after the other and never race on ``$LATEST``.
        """
        check_memory_mb(memory_mb)
        with self._publish_lock:
            if memory_mb in self._aliases:
                return self._aliases[memory_mb]
            if not self._ready:
                self.check()
            name = alias_name(memory_mb)
            version, exists = self._reusable_version(name, memory_mb)
            if version is not None:
                self._pending_notes.append(f"{memory_mb} MB: alias {name} reused (version {version})")
            else:
                version = self._publish(memory_mb)
                self._point_alias(name, version, exists)
                self._pending_notes.append(f"{memory_mb} MB: published version {version} as alias {name}")
            self._aliases[memory_mb] = name
            return name

    def _reusable_version(self, name: str, memory_mb: int) -> tuple[str | None, bool]:
        """The version alias ``name`` points at if it can serve ``memory_mb`` as ``$LATEST``
        is now (else None), and whether the alias exists."""
        from botocore.exceptions import ClientError

        try:
            alias = self.lambda_client.get_alias(FunctionName=self.config.function_name, Name=name)
        except ClientError as exc:
            if exc.response.get("Error", {}).get("Code") == "ResourceNotFoundException":
                return None, False
            raise self._explain(exc, "GetAlias") or exc from None
        version = str(alias["FunctionVersion"])
        configuration = self._call(self.lambda_client.get_function_configuration, "GetFunctionConfiguration",
                                   FunctionName=self.config.function_name, Qualifier=version)
        same = int(configuration.get("MemorySize", 0)) == memory_mb and _deployed(configuration) == _deployed(self._latest)
        return (version if same else None), True

    def _publish(self, memory_mb: int) -> str:
        """Set ``$LATEST`` to ``memory_mb``, publish it, wait until the version is active;
        return the version. A version that came out at another size (another caller changed
        ``$LATEST`` between the update and the publish) is published again, at most twice."""
        for _ in range(3):
            self._update_memory(memory_mb)
            published = self._call(self.lambda_client.publish_version, "PublishVersion",
                                   FunctionName=self.config.function_name,
                                   CodeSha256=self._latest.get("CodeSha256", ""),
                                   Description=f"trainwise rollouts at {memory_mb} MB")
            if int(published.get("MemorySize", 0)) == memory_mb:
                version = str(published["Version"])
                self._wait("published_version_active", Qualifier=version)
                return version
            self._memory_mb = int(published.get("MemorySize", 0)) or None
        raise UserError(
            f"Lambda function '{self.config.function_name}' could not be published at {memory_mb} MB: its "
            "configuration changed under each attempt; another process is updating it, let it finish first"
        )

    def _point_alias(self, name: str, version: str, exists: bool) -> None:
        """Create alias ``name`` on ``version``, or move it there (also when another caller
        created it meanwhile)."""
        from botocore.exceptions import ClientError

        fn = self.config.function_name
        if not exists:
            try:
                self._call(self.lambda_client.create_alias, "CreateAlias", FunctionName=fn, Name=name,
                           FunctionVersion=version, Description="trainwise: rollouts at this memory size")
                return
            except ClientError as exc:
                if exc.response.get("Error", {}).get("Code") != "ResourceConflictException":
                    raise
        self._call(self.lambda_client.update_alias, "UpdateAlias", FunctionName=fn, Name=name, FunctionVersion=version)

    def _update_memory(self, memory_mb: int) -> None:
        """Set ``$LATEST``'s memory to ``memory_mb`` and wait (``function_updated``) until
        the update is ``Successful``; a concurrent update (``ResourceConflictException``)
        is waited out and retried once."""
        from botocore.exceptions import ClientError

        if self._memory_mb == memory_mb:
            return
        for attempt in range(2):
            try:
                self._call(self.lambda_client.update_function_configuration, "UpdateFunctionConfiguration",
                           FunctionName=self.config.function_name, MemorySize=memory_mb)
                break
            except ClientError as exc:
                if exc.response["Error"]["Code"] != "ResourceConflictException" or attempt == 1:
                    raise
                self._wait("function_updated")
        self._wait("function_updated")
        self._memory_mb = memory_mb

    def _wait(self, waiter_name: str, **qualifier: str) -> None:
        """Wait with botocore's ``waiter_name`` until the update (or the published version)
        is active; a failed one is a UserError."""
        from botocore.exceptions import WaiterError

        waiter = self.lambda_client.get_waiter(waiter_name)
        try:
            waiter.wait(FunctionName=self.config.function_name, **qualifier,
                        WaiterConfig={"Delay": self._waiter_delay_s, "MaxAttempts": 150})
        except WaiterError as exc:
            last = exc.last_response or {}
            status = last.get("LastUpdateStatus") or last.get("State") or "unknown"
            reason = (last.get("LastUpdateStatusReason") or last.get("StateReason")
                      or last.get("Error", {}).get("Message") or str(exc))
            what = f"version {qualifier['Qualifier']}" if qualifier else "update"
            raise UserError(
                f"Lambda function '{self.config.function_name}': the {what} did not become active "
                f"({status}): {reason}"
            ) from None

    # -- payloads ----------------------------------------------------------------------------

    def prepare_payload(self, event: RolloutEvent) -> bytes:
        """The request body for one event: weights inline if they fit, else moved to S3."""
        if "weights_npz_b64" in event and not s3_payload.fits_inline(event, self.payload_limit_bytes):
            if not self.config.bucket:
                raise UserError(
                    f"the policy weights make a {s3_payload.json_size(event)}-byte event, over the "
                    f"{self.payload_limit_bytes}-byte synchronous Lambda payload limit, and {self._config_path} "
                    "names no artifacts bucket; rewrite it with `trainwise infra output --write FILE`"
                )
            encoded = event["weights_npz_b64"]
            key = self._weights_keys.get(encoded)  # a batch shares one weights string: upload it once
            if key is None:
                data = base64.b64decode(encoded)
                key = s3_payload.weights_key(self.config.s3_prefix, data)
                self._upload_weights(key, data)
                self._weights_keys = {encoded: key}  # keep only the latest weights
            event = {k: v for k, v in event.items() if k != "weights_npz_b64"}
            event["weights_s3"] = {"bucket": self.config.bucket, "key": key}
        event = {**event, "run_id": self.run_id}
        body = json.dumps(event, separators=(",", ":")).encode("utf-8")
        if len(body) > self.payload_limit_bytes:
            raise UserError(
                f"a rollout event is {len(body)} bytes without its weights, over the "
                f"{self.payload_limit_bytes}-byte Lambda payload limit; shrink policy_spec"
            )
        return body

    def _upload_weights(self, key: str, data: bytes) -> None:
        """Put the weights in S3; the client retries 5xx and SlowDown, what still fails is named."""
        from botocore.exceptions import BotoCoreError, ClientError

        try:
            s3_payload.put_bytes(self.config.bucket, key, data, client=self.s3_client)
        except (ClientError, BotoCoreError) as exc:
            error = getattr(exc, "response", {}).get("Error", {})
            reason = f"{error.get('Code')}: {error.get('Message')}" if error else str(exc)
            raise UserError(
                f"could not upload the policy weights to s3://{self.config.bucket}/{key} after "
                f"{s3_payload.S3_MAX_ATTEMPTS} attempts ({reason}); check that the bucket in {self._config_path} "
                f"exists and that this identity may s3:PutObject under {self.config.s3_prefix}/weights/"
            ) from None

    def decode_result(self, payload: bytes) -> RolloutReply:
        """Parse a result and check its trajectories are a pickle-free npz (fetching them from S3 if moved)."""
        result = json.loads(payload)
        if not isinstance(result, dict):
            raise ValueError(f"the function returned {type(result).__name__}, not a JSON object")
        if "trajectories_s3" in result:
            ref = result.pop("trajectories_s3")
            s3_payload.check_trajectories_ref(ref, self.config.bucket, self.config.s3_prefix, self.run_id)
            data = s3_payload.get_bytes(ref["bucket"], ref["key"], client=self.s3_client)
            _check_npz(data)
            result["trajectories_npz_b64"] = base64.b64encode(data).decode("ascii")
            s3_payload.delete_object(ref["bucket"], ref["key"], client=self.s3_client)
        elif "trajectories_npz_b64" in result:
            _check_npz(base64.b64decode(result["trajectories_npz_b64"]))
        return result

    # -- invoking ----------------------------------------------------------------------------

    def invoke_raw(self, payload: bytes, qualifier: str) -> JsonObject:
        """The one place that calls ``lambda:Invoke``, on alias ``qualifier`` (tests hook
        botocore events on this client)."""
        return self.lambda_client.invoke(
            FunctionName=self.config.function_name,
            Qualifier=qualifier,
            InvocationType="RequestResponse",
            LogType="Tail",
            Payload=payload,
        )

    def _attempt(self, payload: bytes, memory_mb: int, qualifier: str) -> Invocation:
        """One invoke; raises _Rejected for throttles/5xx/connection errors, UserError for config errors."""
        from botocore.exceptions import (
            BotoCoreError,
            ClientError,
            ConnectionClosedError,
            EndpointConnectionError,
            ReadTimeoutError,
        )

        started = time.perf_counter()
        try:
            response = self.invoke_raw(payload, qualifier)
        except ClientError as exc:
            code = exc.response.get("Error", {}).get("Code", "")
            status = exc.response.get("ResponseMetadata", {}).get("HTTPStatusCode", 0)
            if code in _THROTTLE_CODES or status == 429 or status >= 500:
                raise _Rejected(f"{code or status}: {exc.response.get('Error', {}).get('Message', '')}") from None
            raise self._explain(exc, "InvokeFunction") or exc
        except (ReadTimeoutError, ConnectionClosedError) as exc:
            raise _Rejected(f"connection: {exc}") from None
        except EndpointConnectionError as exc:  # a connection error whose text names the region and the network
            raise _Rejected(str(self._explain(exc, "InvokeFunction") or exc)) from None
        except BotoCoreError as exc:
            explained = self._explain(exc, "InvokeFunction")
            if explained is not None:
                raise explained from None
            raise
        round_trip_ms = (time.perf_counter() - started) * 1000.0
        body = response["Payload"].read()
        report = parse_report(decode_log_result(response.get("LogResult")))
        error: str | None = None
        result: RolloutReply | None = None
        if response.get("FunctionError"):
            error = _function_error_text(response["FunctionError"], body)
        else:
            try:
                result = self.decode_result(body)
            except (ValueError, KeyError, TypeError) as exc:
                error = f"malformed result: {exc}"
            except (ClientError, BotoCoreError) as exc:  # offloaded trajectories could not be read
                error = f"result not fetched from S3: {exc}"
        if report is not None:
            billing = report.billing_record(error)
        else:
            billing = BillingRecord(
                billed_ms=int(math.ceil(round_trip_ms)),
                duration_ms=round_trip_ms,
                init_ms=0.0,
                memory_mb=memory_mb,
                error=error,
                cold_start=bool(result and result.get("cold_start")),
                label="measured",
            )
        return Invocation(result=result if error is None else None, billing=billing)

    def _invoke_one(self, payload: bytes, memory_mb: int, qualifier: str) -> tuple[Invocation, bool]:
        """One attempt at one event, and whether it ran (a refused one is billed nothing)."""
        try:
            return self._attempt(payload, memory_mb, qualifier), True
        except _Rejected as exc:
            return Invocation(None, BillingRecord(0, 0.0, 0.0, memory_mb, error=f"rejected: {exc}", label="billed")), False

    def invoke(self, events: list[RolloutEvent], memory_mb: int, concurrency: int | None = None) -> LambdaInvokeBatch:
        """Invoke one function per event at ``memory_mb`` (its alias, :meth:`alias_for`), at
        most ``concurrency`` at once, one attempt each (the module's docstring says why)."""
        if concurrency is not None and (not isinstance(concurrency, int) or concurrency < 1):
            raise UserError(f"concurrency must be a positive integer, got {concurrency!r}")
        started = time.perf_counter()
        notes: list[str] = []
        if not events:
            return LambdaInvokeBatch([], 0.0, 0.0, "measured", concurrency or 0, notes)
        qualifier = self.alias_for(memory_mb)
        with self._publish_lock:
            notes.extend(self._pending_notes)
            self._pending_notes.clear()
        payloads = [self.prepare_payload(event) for event in events]
        width = min(concurrency or len(events), len(events))
        if self.config.reserved_concurrency and width > self.config.reserved_concurrency:
            notes.append(f"concurrency {width} capped at the function's reserved concurrency "
                         f"{self.config.reserved_concurrency}")
            width = self.config.reserved_concurrency
        with ThreadPoolExecutor(max_workers=width, thread_name_prefix="lambda-invoke") as pool:
            outcomes = list(pool.map(lambda p: self._invoke_one(p, memory_mb, qualifier), payloads))
        failed = sum(1 for inv, _ in outcomes if inv.billing.error)
        if failed:
            notes.append(f"{failed} of {len(events)} invocations failed")
        wall = time.perf_counter() - started
        ran = sum(1 for _, r in outcomes if r)
        return LambdaInvokeBatch(
            invocations=[inv for inv, _ in outcomes],
            wall_s=wall,
            lambda_s=wall,
            lambda_s_label="measured",
            concurrency=width,
            notes=notes,
            rejected_attempts=len(outcomes) - ran,
            requests=ran,
        )

    def close(self) -> None:
        for client in (self._lambda, self._s3):
            if client is not None and hasattr(client, "close"):
                client.close()
        self._lambda = self._s3 = None


def alias_name(memory_mb: int) -> str:
    """The alias of the version that runs at ``memory_mb``: ``trainwise-<MB>mb``."""
    return f"{ALIAS_PREFIX}{memory_mb}mb"


def _deployed(configuration: JsonObject) -> tuple[Any, ...]:
    """What a version shares with ``$LATEST`` to run the same deployment: every field of
    :data:`_DEPLOYMENT_FIELDS` (code, handler, runtime, role, environment, ...), in that order."""
    return tuple(configuration.get(k) for k in _DEPLOYMENT_FIELDS)


def _function_error_text(kind: str, body: bytes) -> str:
    """``Unhandled: Sandbox.Timedout: Task timed out after 3.00 seconds``-style text from an error body."""
    try:
        payload = json.loads(body)
    except ValueError:
        return f"{kind}: {body[:200].decode('utf-8', errors='replace')}"
    if isinstance(payload, dict):
        parts = [str(payload.get("errorType", "")).strip(), str(payload.get("errorMessage", "")).strip()]
        return f"{kind}: " + ": ".join(p for p in parts if p)
    return f"{kind}: {payload}"


def _check_npz(data: bytes) -> None:
    """Open every array with allow_pickle=False; an object array or a non-npz raises ValueError."""
    import numpy as np

    try:
        with np.load(io.BytesIO(data), allow_pickle=False) as archive:
            for name in archive.files:
                archive[name]
    except (OSError, ValueError, EOFError) as exc:
        raise ValueError(f"trajectories are not a pickle-free npz ({exc})") from None
    except Exception as exc:  # zipfile.BadZipFile and friends
        raise ValueError(f"trajectories are not a valid npz ({type(exc).__name__}: {exc})") from None
