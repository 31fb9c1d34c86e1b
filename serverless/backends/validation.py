"""Input checks shared by every backend (before any work starts)."""

from __future__ import annotations

from serverless.backends.base import LAMBDA_MAX_MEMORY_MB, LAMBDA_MIN_MEMORY_MB
from trainwise.errors import UserError


def check_memory_mb(memory_mb: int) -> None:
    """Lambda's memory range: 128 to 10,240 MB in 1 MB steps."""
    if isinstance(memory_mb, bool) or not isinstance(memory_mb, int):
        raise UserError(f"memory must be a whole number of MB, got {memory_mb!r}")
    if not LAMBDA_MIN_MEMORY_MB <= memory_mb <= LAMBDA_MAX_MEMORY_MB:
        raise UserError(
            f"memory {memory_mb} MB is outside Lambda's range: allowed {LAMBDA_MIN_MEMORY_MB}-{LAMBDA_MAX_MEMORY_MB} MB"
        )
