"""`trainwise infra plan|apply|destroy|output`: a thin wrapper over terraform (or tofu).

The wrapper adds three things to calling the binary yourself: it finds the binary
(``terraform`` first, then ``tofu``) and says how to install one when neither is
on PATH; it builds the function zip before ``plan``/``apply`` and passes its
absolute path (Terraform hashes the file at plan time), with the user's env module
in it for ``--env module:EnvId``; and ``output --write FILE`` turns ``terraform
output -json`` into the Lambda backend's configuration.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import TYPE_CHECKING

from trainwise.cli import add_json_out
from core.errors import UserError
from core.json_edge import JsonObject

if TYPE_CHECKING:  # pragma: no cover
    from serverless.lambda_config import LambdaConfigFile

PROJECT_ROOT = Path(__file__).resolve().parents[2]
DEFAULT_DIR = PROJECT_ROOT / "infra" / "terraform" / "envs" / "dev"
DEFAULT_ZIP = PROJECT_ROOT / "build" / "rollout.zip"
DEFAULT_CONFIG = Path(".trainwise") / "aws.json"
BINARIES = ("terraform", "tofu")

INSTALL_HINT = (
    "neither `terraform` nor `tofu` is on PATH. Install one of them:\n"
    "  Terraform: https://developer.hashicorp.com/terraform/install (or: brew install terraform; "
    "apt: add the HashiCorp apt repository, then apt-get install terraform)\n"
    "  OpenTofu:  https://opentofu.org/docs/intro/install/ (or: brew install opentofu; snap install --classic opentofu)\n"
    "or point --binary at the executable. The Terraform lives in infra/terraform/envs/dev and can also be run "
    "by hand; see docs/aws.md."
)


def find_binary(explicit: str | None = None) -> str:
    """Path of terraform/tofu, or a UserError that says how to install one."""
    if explicit:
        found = shutil.which(explicit)
        if found is None:
            raise UserError(f"--binary {explicit} is not an executable on PATH; {INSTALL_HINT}")
        return found
    for name in BINARIES:
        found = shutil.which(name)
        if found:
            return found
    raise UserError(INSTALL_HINT)


def _check_dir(path: Path) -> Path:
    path = path.resolve()
    if not path.is_dir() or not any(path.glob("*.tf")):
        raise UserError(f"--dir {path} is not a Terraform root module (no .tf files); the default is {DEFAULT_DIR}")
    return path


def _run(binary: str, args: list[str], cwd: Path, capture: bool = False) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "CHECKPOINT_DISABLE": "1", "TF_IN_AUTOMATION": "1"}
    print(f"+ {Path(binary).name} {' '.join(args)}   (in {cwd})", file=sys.stderr)
    proc = subprocess.run([binary, *args], cwd=cwd, env=env, text=True,
                          capture_output=capture)
    if proc.returncode != 0:
        detail = f":\n{proc.stderr.strip()}" if capture and proc.stderr else " (see its output above)"
        raise UserError(f"`{Path(binary).name} {args[0]}` failed with exit code {proc.returncode}{detail}")
    return proc


def _ensure_init(binary: str, cwd: Path) -> None:
    """``init`` is idempotent and quick once providers are cached, so run it every time."""
    _run(binary, ["init", "-input=false"], cwd)


def _layer_arg(args: argparse.Namespace) -> list[str]:
    """Check --layer-zip (before any work) and turn it into a -var; none means variables.tf's default."""
    if args.layer_zip is None:
        return []
    if args.layer_zip == "":
        return ["-var", "layer_zip_path="]
    layer = Path(args.layer_zip).resolve()
    if not layer.is_file():
        raise UserError(f"--layer-zip {layer} does not exist; build it with "
                        f"`python -m serverless.lambda_package --layer --out {layer}`, or pass --layer-zip '' "
                        "to deploy without a layer")
    return ["-var", f"layer_zip_path={layer}"]


def _build_zip(args: argparse.Namespace) -> list[str]:
    """Build the function zip (Terraform hashes it at plan time) and pass its absolute path."""
    from serverless.lambda_package import build_function_zip

    zip_path = Path(args.package_zip).resolve()
    if not args.package_zip or zip_path.is_dir():
        raise UserError(f"--package-zip {args.package_zip!r} must name a file to write, such as build/rollout.zip")
    try:
        report = build_function_zip(zip_path, env_id=args.env)
    except OSError as exc:
        raise UserError(f"--package-zip {zip_path}: cannot write the function zip there ({exc.strerror})") from None
    except UserError as exc:
        raise UserError(f"--env: {exc}") from None
    shipped = report.get("env_module_files", [])
    env_note = f", the env module's {len(shipped)} file(s) {', '.join(shipped)}" if shipped else ""
    print(f"built {zip_path} ({report['zip_bytes']} bytes, {len(report['files'])} files{env_note})", file=sys.stderr)
    return ["-var", f"package_zip_path={zip_path}"]


def _var_args(args: argparse.Namespace) -> list[str]:
    out: list[str] = []
    for item in args.var or []:
        if "=" not in item:
            raise UserError(f"--var {item!r} must look like NAME=VALUE")
        out += ["-var", item]
    if args.var_file:
        if not Path(args.var_file).is_file():
            raise UserError(f"--var-file {args.var_file} does not exist")
        out += [f"-var-file={Path(args.var_file).resolve()}"]
    return out


def cmd_plan_apply_destroy(args: argparse.Namespace) -> JsonObject:
    cwd = _check_dir(Path(args.dir))
    extra = _var_args(args) + _layer_arg(args)
    binary = find_binary(args.binary)
    action = args.infra_command
    # destroy too evaluates filebase64sha256(package_zip_path), so every action gets a built zip.
    command = [action, "-input=false", *extra, *_build_zip(args)]
    _ensure_init(binary, cwd)
    if action in ("apply", "destroy") and args.auto_approve:
        command.append("-auto-approve")
    _run(binary, command, cwd)
    result: JsonObject = {"action": action, "dir": str(cwd), "binary": binary}
    if action == "apply":
        print("next: trainwise infra output --write .trainwise/aws.json", file=sys.stderr)
    return result


def terraform_outputs_to_config(outputs: JsonObject) -> LambdaConfigFile:
    from serverless.lambda_config import config_from_terraform_outputs

    return config_from_terraform_outputs(outputs)


def _write_config(path: Path, config: LambdaConfigFile) -> None:
    from core.atomic import write_text

    write_text(path, json.dumps(config, indent=2, sort_keys=True) + "\n")


def cmd_output(args: argparse.Namespace) -> JsonObject:
    if args.raw is not None and args.write is not None:
        raise UserError("--raw prints one output and --write writes the Lambda backend config; give one")
    if args.write is not None and args.write.exists() and args.write.is_dir():
        raise UserError(f"--write {args.write} is a directory; give a file such as {args.write}/aws.json")
    if args.from_json is not None:
        source = Path(args.from_json)
        if not source.is_file():
            raise UserError(f"--from-json {args.from_json!r} does not exist or is not a file")
        try:
            outputs = json.loads(source.read_text(encoding="utf-8"))
        except (json.JSONDecodeError, UnicodeDecodeError) as exc:
            raise UserError(f"--from-json {args.from_json} is not JSON ({exc})") from None
        if not isinstance(outputs, dict):
            raise UserError(f"--from-json {args.from_json} must hold the object `terraform output -json` prints")
    else:
        cwd = _check_dir(Path(args.dir))
        binary = find_binary(args.binary)
        proc = _run(binary, ["output", "-json"], cwd, capture=True)
        try:
            outputs = json.loads(proc.stdout or "{}")
        except json.JSONDecodeError as exc:
            raise UserError(f"`terraform output -json` did not print JSON ({exc})") from None
    if args.raw is not None:
        return _print_raw(outputs, args.raw)
    if args.write is None:
        print(json.dumps({k: (v.get("value") if isinstance(v, dict) else v) for k, v in outputs.items()}, indent=2))
        return {"outputs": outputs}
    config = terraform_outputs_to_config(outputs)
    _write_config(args.write, config)
    print(f"Lambda backend config written to {args.write}: use `trainwise rl train --backend lambda "
          f"--lambda-config {args.write}`", file=sys.stderr)
    return {"config_path": str(args.write), "config": config}


def _print_raw(outputs: JsonObject, name: str) -> JsonObject:
    """One output's value on stdout, a list joined with commas (``ingest cluster --workers $(...)``)."""
    if name not in outputs:
        raise UserError(f"--raw {name}: no such output; the outputs are {', '.join(sorted(outputs)) or 'none'}")
    value = outputs[name].get("value") if isinstance(outputs[name], dict) else outputs[name]
    print(",".join(map(str, value)) if isinstance(value, list) else value)
    return {"output": name, "value": value}


def _common(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--dir", default=str(DEFAULT_DIR), help="Terraform root module (default: infra/terraform/envs/dev)")
    parser.add_argument("--binary", default=None, help="terraform or tofu executable (default: whichever is on PATH)")


def register(sub: argparse._SubParsersAction) -> None:
    infra = sub.add_parser("infra", help="provision AWS Lambda, S3 and EC2 with Terraform (plan/apply/destroy/output)")
    infra_sub = infra.add_subparsers(dest="infra_command", metavar="ACTION")
    infra_sub.required = True
    for action, text in (("plan", "show what apply would change"), ("apply", "create or update the resources"),
                         ("destroy", "delete every resource of the environment")):
        p = infra_sub.add_parser(action, help=text)
        _common(p)
        p.add_argument("--var", action="append", metavar="NAME=VALUE", help="a Terraform variable (repeatable)")
        p.add_argument("--var-file", default=None, help="a .tfvars file")
        p.add_argument("--package-zip", default=str(DEFAULT_ZIP), help="where to build the function zip")
        p.add_argument("--env", default=None, metavar="MODULE:ENV_ID",
                       help="your own env, as for `rl train --env`: its module (importable from PYTHONPATH) "
                            "ships in the function zip")
        p.add_argument("--layer-zip", default=None,
                       help="numpy+gymnasium layer zip (default: the path in variables.tf; '' for no layer)")
        if action != "plan":
            p.add_argument("--auto-approve", action="store_true", help="skip terraform's confirmation prompt")
        add_json_out(p)
        p.set_defaults(handler=cmd_plan_apply_destroy)
    p = infra_sub.add_parser("output", help="print the outputs, or --write the Lambda backend config")
    _common(p)
    p.add_argument("--write", type=Path, default=None, metavar="FILE",
                   help=f"write the Lambda backend config (conventionally {DEFAULT_CONFIG})")
    p.add_argument("--raw", default=None, metavar="NAME",
                   help="print one output's value alone (a list joined with commas), e.g. ingest_agent_addresses")
    p.add_argument("--from-json", default=None, metavar="FILE",
                   help="read a saved `terraform output -json` instead of running terraform")
    add_json_out(p)
    p.set_defaults(handler=cmd_output)
