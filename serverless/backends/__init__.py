"""Function backends: local Lambda emulator, Ray tasks, AWS Lambda.

All implement :class:`serverless.invocation.FunctionBackend`; build one with
:func:`make_backend`.
"""

from __future__ import annotations

from typing import Any

from core.errors import UserError

BACKENDS = ("local", "ray", "lambda")


def make_backend(name: str, **options: Any) -> Any:
    """A backend by name. Options: local: see ``LocalBackend``; ray: ``address``;
    lambda: ``lambda_config`` (default ``.trainwise/aws.json``)."""
    if name == "local":
        from serverless.backends.local import LocalBackend

        return LocalBackend(**options)
    if name == "ray":
        from serverless.backends.ray_backend import RayBackend

        return RayBackend(address=options.get("address"))
    if name == "lambda":
        try:
            from serverless.backends.lambda_backend import LambdaBackend
        except ImportError as exc:
            raise UserError(f"the lambda backend is not available: {exc}") from None
        return LambdaBackend.from_config_file(options.get("lambda_config") or ".trainwise/aws.json")
    raise UserError(f"unknown backend {name!r}; allowed: {', '.join(BACKENDS)}")
