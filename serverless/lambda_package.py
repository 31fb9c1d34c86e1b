"""Build the rollout function's deployment zip and its dependency layer.

    python -m serverless.lambda_package --out build/rollout.zip [--env my_envs:Beacon-v0]
    python -m serverless.lambda_package --layer --arch x86_64 --out build/rollout-deps-layer.zip

The function zip holds only the project's own modules that the handler imports,
found by the stdlib's :mod:`modulefinder` from ``serverless.handler`` (first-party
packages only), so nothing the handler does not need ships. For a user's own env
(``--env module:EnvId``) the module's file, or its whole top-level package, ships
beside them, so the function's ``gymnasium.make`` can import it. Third-party imports
are listed in the build report; they come from a **Lambda layer** built by
``--layer`` with pip for the Lambda platform: CPython :data:`LAMBDA_PYTHON_VERSION` wheels
for the chosen architecture, manylinux up to the glibc of the runtime's OS (Amazon Linux
2023). A layer keeps the function zip tiny, so redeploying after a
code change uploads kilobytes, while the rarely changing numpy + gymnasium (about
20 MB zipped, well under the 250 MB unzipped limit) upload once. boto3 is part of
the Lambda Python runtime and is not packed.

The zip is reproducible (sorted entries, fixed timestamps, fixed permissions), so
Terraform's ``source_code_hash`` changes only when the code does.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import subprocess
import sys
import tempfile
import zipfile
from pathlib import Path
from typing import BinaryIO, NotRequired, TypedDict

from core.errors import UserError
from serverless.architectures import ARCHITECTURES

#: The Python the function runs in. Everything that depends on it follows this one value:
#: the Lambda runtime's name, the CPython tag (cpXY) of the layer's wheels, and the
#: Terraform module's runtime default (tests/infra/test_terraform.py checks it).
LAMBDA_PYTHON_VERSION = "3.12"
LAMBDA_RUNTIME = f"python{LAMBDA_PYTHON_VERSION}"
#: glibc of Amazon Linux 2023, the OS of the python3.12 and later runtimes: the newest
#: manylinux wheels the function can load are manylinux_2_34.
LAMBDA_GLIBC = (2, 34)
_OLDEST_MANYLINUX_GLIBC_MINOR = 17  # manylinux2014

PROJECT_ROOT = Path(__file__).resolve().parent.parent
FIRST_PARTY = ("serverless", "core")
HANDLER_MODULE = "serverless.handler"
HANDLER_ENTRY = "serverless.handler.handler"
PROVIDED_BY_RUNTIME = {"boto3", "botocore", "s3transfer", "jmespath", "urllib3", "dateutil"}
# The layer's pins follow pyproject.toml (gymnasium is pinned there; numpy is the range's newest).
# Reached only through the backend factory (serverless.backends.make_backend) or the torch
# policy: learner-side code the function never runs (and torch/ray are not in the layer).
LEARNER_ONLY = frozenset({
    "serverless.backends.local",
    "serverless.backends.local_worker",
    "serverless.backends.ray_backend",
    "serverless.backends.lambda_backend",
    "serverless.torch_policy",
})
#: Third-party packages that modules in the function's closure import only inside functions the
#: handler never calls, each with the function; the layer leaves them out (torch alone is larger
#: than Lambda's 250 MB unzipped limit). The awslambdaric test runs the zip without them.
NOT_IN_LAYER = {
    "torch": "serverless.network.Activation.torch: the learner's torch model",
    "psutil": "core.paths.hardware: a profile's hardware key, taken on the learner",
}
LAYER_REQUIREMENTS = ("numpy>=1.26,<3", "gymnasium==1.2.2")
# gymnasium's Box2D envs (LunarLander) also import Box2D and pygame: pins from pyproject.toml.
BOX2D_REQUIREMENTS = ("box2d==2.3.10", "pygame==2.6.1")
_FIXED_TIME = (2020, 1, 1, 0, 0, 0)


def _module_path(module: str, root: Path) -> Path | None:
    base = root.joinpath(*module.split("."))
    if base.with_suffix(".py").is_file():
        return base.with_suffix(".py")
    if (base / "__init__.py").is_file():
        return base / "__init__.py"
    return None


def handler_closure(entry: str = HANDLER_MODULE, root: Path = PROJECT_ROOT) -> tuple[list[str], list[str]]:
    """(first-party modules the handler may import, third-party packages it imports).

    The stdlib's :mod:`modulefinder` follows every import statement of ``entry`` and of the
    first-party modules it reaches, including function-level (lazy) ones, because a lazy import
    still runs in Lambda when its code path does (the policy's S3 weights path imports
    ``s3_payload`` lazily). Its search path is ``root`` alone, so it reads only the project's
    files; everything else it cannot find there is a stdlib or third-party name, told apart with
    ``sys.stdlib_module_names``. The one exclusion is :data:`LEARNER_ONLY`: modules reached only
    through the backend factory or the torch policy, which the function never calls; and the
    third-party packages of :data:`NOT_IN_LAYER`, imported only by functions it never calls. Missing a
    module breaks the function at run time, while packing an unneeded one only costs bytes, so
    the rule errs on the side of packing (an import under ``if TYPE_CHECKING:`` is packed too).
    Package ``__init__`` files along each module's path are included, since Python runs them on
    import. The third-party names leave out what the runtime provides (boto3). The tests run the
    handler from the zip alone, in a fresh interpreter and under awslambdaric
    (tests/serverless/test_lambda_package.py, tests/serverless/test_lambda_runtime.py).
    """
    import modulefinder

    if _module_path(entry, root) is None:
        raise FileNotFoundError(f"handler module {entry} not found under {root}")
    finder = modulefinder.ModuleFinder(path=[str(root)], excludes=sorted(LEARNER_ONLY))
    finder.import_hook(entry)
    first_party = {name for name, module in finder.modules.items()
                   if name.split(".")[0] in FIRST_PARTY and module.__file__ is not None}
    third_party = {name.split(".")[0] for name in finder.badmodules} - set(FIRST_PARTY)
    third_party = {top for top in third_party if top not in sys.stdlib_module_names and top != "__future__"}
    return sorted(first_party), sorted(third_party - PROVIDED_BY_RUNTIME - set(NOT_IN_LAYER))


def _write_zip(out: Path, files: dict[str, bytes]) -> None:
    from core.atomic import write_with

    def write(fh: BinaryIO) -> None:
        with zipfile.ZipFile(fh, "w", compression=zipfile.ZIP_DEFLATED, compresslevel=9) as zf:
            for name in sorted(files):
                info = zipfile.ZipInfo(name, date_time=_FIXED_TIME)
                info.external_attr = 0o644 << 16
                info.compress_type = zipfile.ZIP_DEFLATED
                zf.writestr(info, files[name])

    write_with(out, write)


class ZipReport(TypedDict):
    """What was packed: the zip's path, size and hash, and how much it unpacks to."""

    path: str
    zip_bytes: int
    sha256: str
    unzipped_bytes: int


class FunctionZipReport(ZipReport):
    handler: str
    files: list[str]
    needs_layer: list[str]  # the third-party modules the handler imports (the layer's job)
    env_module_files: NotRequired[list[str]]  # the user's env module, when the env id names one


class LayerZipReport(ZipReport):
    arch: str
    runtime: str
    requirements: list[str]


def _report(out: Path, unzipped_bytes: int) -> ZipReport:
    data = out.read_bytes()
    return {"path": str(out), "zip_bytes": len(data), "sha256": hashlib.sha256(data).hexdigest(),
            "unzipped_bytes": unzipped_bytes}


def _env_module_files(env_id: str | None) -> dict[str, bytes]:
    """The user's env module of a ``module:EnvId`` id, as zip entries: its file, or every
    ``.py`` file of its top-level package (none for a registry id or an installed package)."""
    from serverless.envs import check_env_id, env_module_root

    if env_id is None:
        return {}
    check_env_id(env_id)  # the module imports and registers the env (a one-line error otherwise)
    source = env_module_root(env_id)
    if source is None:
        return {}
    if source.is_file():
        return {source.name: source.read_bytes()}
    return {
        str(path.relative_to(source.parent)).replace("\\", "/"): path.read_bytes()
        for path in sorted(source.rglob("*.py")) if "__pycache__" not in path.parts
    }


def build_function_zip(out: Path, entry: str = HANDLER_MODULE, root: Path = PROJECT_ROOT,
                       env_id: str | None = None) -> FunctionZipReport:
    """Pack the handler and the first-party modules it imports, and the user's env module
    when ``env_id`` names one; nothing else."""
    if _module_path(entry, root) is None:
        raise FileNotFoundError(f"handler module {entry} not found under {root}")
    modules, third_party = handler_closure(entry, root)
    files = {}
    for module in modules:
        path = _module_path(module, root)
        assert path is not None
        files[str(path.relative_to(root)).replace("\\", "/")] = path.read_bytes()
    env_files = _env_module_files(env_id)
    clash = sorted(set(env_files) & set(files))
    if clash:
        raise UserError(f"env {env_id!r}: its module's files {clash} would overwrite the project's own in the zip; "
                        "rename the module")
    files |= env_files
    _write_zip(out, files)
    unzipped = sum(len(v) for v in files.values())
    report: FunctionZipReport = {**_report(out, unzipped), "handler": HANDLER_ENTRY, "files": sorted(files),
                                 "needs_layer": third_party}
    if env_files:
        report["env_module_files"] = sorted(env_files)
    return report


def wheel_platforms(arch: str) -> list[str]:
    """pip's ``--platform`` values for the runtime on ``arch``: every manylinux from the runtime's
    glibc down to manylinux2014 (pip takes a platform literally, not the older ones it implies)."""
    machine = ARCHITECTURES.get(arch).wheel_machine
    major, newest = LAMBDA_GLIBC
    minors = range(newest, _OLDEST_MANYLINUX_GLIBC_MINOR - 1, -1)
    return [*(f"manylinux_{major}_{minor}_{machine}" for minor in minors), f"manylinux2014_{machine}"]


def build_layer_zip(out: Path, arch: str = "x86_64",
                    requirements: tuple[str, ...] = LAYER_REQUIREMENTS) -> LayerZipReport:
    """pip-install the handler's third-party dependencies for the Lambda platform into ``python/``."""
    if arch not in ARCHITECTURES:
        raise ValueError(ARCHITECTURES.unknown(arch))
    platforms = [arg for platform in wheel_platforms(arch) for arg in ("--platform", platform)]
    with tempfile.TemporaryDirectory() as tmp:
        target = Path(tmp) / "python"
        subprocess.run(
            [sys.executable, "-m", "pip", "install", "--quiet", "--no-compile", "--target", str(target),
             *platforms, "--python-version", LAMBDA_PYTHON_VERSION,
             "--implementation", "cp", "--only-binary=:all:", *requirements],
            check=True,
        )
        files = {}
        for path in sorted(target.rglob("*")):
            if path.is_file() and "__pycache__" not in path.parts and not path.name.endswith(".pyc"):
                files[str(path.relative_to(tmp)).replace("\\", "/")] = path.read_bytes()
        _write_zip(out, files)
        unzipped = sum(len(v) for v in files.values())
    return {**_report(out, unzipped), "arch": arch, "runtime": LAMBDA_RUNTIME, "requirements": list(requirements)}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m serverless.lambda_package", description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", type=Path, default=None, help="zip to write (default build/rollout.zip, "
                        "or build/rollout-deps-layer-<arch>.zip with --layer)")
    parser.add_argument("--layer", action="store_true", help="build the numpy+gymnasium layer instead")
    parser.add_argument("--arch", choices=ARCHITECTURES.names(), default="x86_64")
    parser.add_argument("--env", default=None, metavar="MODULE:ENV_ID",
                        help="ship the user's env module of this id (gymnasium's module:EnvId form) in the zip")
    parser.add_argument("--box2d", action="store_true",
                        help="add Box2D and pygame to the layer (needed for LunarLander and other Box2D envs)")
    args = parser.parse_args(argv)
    if args.layer:
        out = args.out or Path(f"build/rollout-deps-layer-{args.arch}.zip")
        requirements = LAYER_REQUIREMENTS + (BOX2D_REQUIREMENTS if args.box2d else ())
        report = build_layer_zip(out, args.arch, requirements)
    else:
        try:
            report = build_function_zip(args.out or Path("build/rollout.zip"), env_id=args.env)
        except UserError as exc:
            print(f"{parser.prog}: error: --env: {exc}", file=sys.stderr)
            return 2
    print(json.dumps(report, indent=2))
    return 0


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
