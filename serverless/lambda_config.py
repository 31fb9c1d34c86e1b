"""The Lambda backend's configuration: what it must know about the deployment.

``trainwise infra output --write FILE`` writes it from ``terraform output -json``
(:func:`config_from_terraform_outputs`); :class:`LambdaConfig` validates it, with
errors that name the field and say how to regenerate the file.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from pathlib import Path
from typing import TypedDict

from serverless.architectures import ARCHITECTURES
from serverless.s3_payload import DEFAULT_PREFIX
from core.errors import UserError
from core.json_edge import JsonObject

DEFAULT_CONFIG_PATH = Path(".trainwise/aws.json")
_REGION = re.compile(r"^[a-z]{2}(-[a-z]+)+-[0-9]+$")
_ARN_REGION = re.compile(r"^arn:aws[a-zA-Z-]*:lambda:([a-z0-9-]+):")


@dataclass(frozen=True)
class LambdaConfig:
    """What the backend needs to know about the deployment (``trainwise infra output --write``)."""

    function_name: str
    region: str
    function_arn: str | None = None
    bucket: str | None = None
    s3_prefix: str = DEFAULT_PREFIX
    timeout_s: int = 300
    reserved_concurrency: int | None = None
    architecture: str = "x86_64"
    source: str | None = None

    _REQUIRED = ("function_name", "region")

    @classmethod
    def from_dict(cls, data: JsonObject, where: str = "config") -> LambdaConfig:
        """Validate a config dict; a bad field raises a UserError that names it."""
        if not isinstance(data, dict):
            raise UserError(f"{where}: expected a JSON object with keys function_name, region, bucket, ...")
        missing = [k for k in cls._REQUIRED if not data.get(k)]
        if missing:
            raise UserError(
                f"{where}: missing {', '.join(missing)}; write the file with "
                "`trainwise infra output --write FILE` after `trainwise infra apply`"
            )
        known = {"function_name", "region", "function_arn", "bucket", "s3_prefix", "timeout_s",
                 "reserved_concurrency", "architecture", "source"}
        kwargs = {k: v for k, v in data.items() if k in known}
        for name in ("function_name", "region"):
            if not isinstance(kwargs[name], str):
                raise UserError(f"{where}: '{name}' must be a string, got {type(kwargs[name]).__name__}")
        if not _REGION.match(kwargs["region"]):
            raise UserError(
                f"{where}: region {kwargs['region']!r} is not an AWS region name; use one like us-east-1, "
                "eu-west-1 or ap-southeast-2 (the region you deployed to: `trainwise infra output` prints it)"
            )
        if "timeout_s" in kwargs and (not isinstance(kwargs["timeout_s"], int) or not 1 <= kwargs["timeout_s"] <= 900):
            raise UserError(f"{where}: 'timeout_s' must be an integer from 1 to 900, got {kwargs['timeout_s']!r}")
        rc = kwargs.get("reserved_concurrency")
        if rc is not None and (not isinstance(rc, int) or rc < 1):
            # Terraform's -1 means "unreserved": no cap from the function itself.
            kwargs["reserved_concurrency"] = None
        if kwargs.get("architecture", "x86_64") not in ARCHITECTURES:
            raise UserError(f"{where}: 'architecture': {ARCHITECTURES.unknown(kwargs['architecture'])}")
        arn = kwargs.get("function_arn")
        if arn:
            match = _ARN_REGION.match(arn)
            if match and match.group(1) != kwargs["region"]:
                raise UserError(
                    f"{where}: region '{kwargs['region']}' does not match the function ARN's region "
                    f"'{match.group(1)}' ({arn}); set \"region\": \"{match.group(1)}\" or rewrite the file "
                    "with `trainwise infra output --write FILE`"
                )
        return cls(**kwargs)

    @classmethod
    def from_file(cls, path: str | Path) -> LambdaConfig:
        path = Path(path)
        if not path.is_file():
            raise UserError(
                f"Lambda backend config {path} does not exist; deploy with `trainwise infra apply`, then "
                f"write it with `trainwise infra output --write {path}`, or name another file with --lambda-config "
                "(rl.backend_options.lambda_config in a workload file)"
            )
        try:
            data = json.loads(path.read_text())
        except json.JSONDecodeError as exc:
            raise UserError(f"Lambda backend config {path} is not valid JSON ({exc})") from None
        return cls.from_dict(data, where=str(path))


# Terraform output name -> config key. outputs.tf in infra/terraform/envs/dev declares each one;
# tests/infra/test_terraform.py checks that they stay in step.
TERRAFORM_OUTPUT_KEYS: dict[str, str] = {
    "rollout_function_name": "function_name",
    "rollout_function_arn": "function_arn",
    "aws_region": "region",
    "artifacts_bucket": "bucket",
    "s3_prefix": "s3_prefix",
    "lambda_timeout_s": "timeout_s",
    "lambda_reserved_concurrency": "reserved_concurrency",
    "lambda_architecture": "architecture",
    "learner_instance_ids": "learner_instance_ids",
    "ingest_instance_ids": "ingest_instance_ids",
}


class LambdaConfigFile(TypedDict, total=False):
    """The config file ``trainwise infra output --write`` writes (:func:`config_from_terraform_outputs`);
    :meth:`LambdaConfig.from_dict` checks it (``function_name`` and ``region`` required)."""

    function_name: str
    function_arn: str
    region: str
    bucket: str
    s3_prefix: str
    timeout_s: int
    reserved_concurrency: int  # -1: unreserved
    architecture: str
    learner_instance_ids: list[str]
    ingest_instance_ids: list[str]
    source: str


def config_from_terraform_outputs(outputs: JsonObject) -> LambdaConfigFile:
    """Turn ``terraform output -json`` (``{name: {"value": ...}}``) into the backend's config dict."""
    if not isinstance(outputs, dict):
        raise UserError("terraform output -json did not return a JSON object")
    missing = [name for name in ("rollout_function_name", "aws_region") if name not in outputs]
    if missing:
        raise UserError(
            f"terraform outputs lack {', '.join(missing)}: run `trainwise infra apply` first (an empty "
            "state has no outputs), from infra/terraform/envs/dev or with --dir pointing at a root module "
            "that wires modules/rollout_lambda"
        )
    config = LambdaConfigFile()
    for tf_name, key in TERRAFORM_OUTPUT_KEYS.items():
        if tf_name in outputs:
            entry = outputs[tf_name]
            config[key] = entry["value"] if isinstance(entry, dict) and "value" in entry else entry
    config["source"] = "terraform output -json"
    LambdaConfig.from_dict(config, where="terraform outputs")  # validate before anything is written
    return config
