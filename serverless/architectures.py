"""Lambda architectures: the registry every list of architectures reads.

An architecture names the price it is billed at (a key of ``lambda.gb_second_usd`` in
``serverless/data/prices.json``) and the machine of the manylinux wheels the function's
layer is built from (``serverless.lambda_package.wheel_platforms`` adds the runtime's
glibc). Adding one (say a future ``riscv64``) is one registration here plus its price in
the price table; the CLI choices, the workload-spec check, the trainer's check and the
layer builder all read :data:`ARCHITECTURES`.
"""

from __future__ import annotations

from dataclasses import dataclass

from core.registry import Registry


@dataclass(frozen=True)
class Architecture:
    """One Lambda instruction-set architecture."""

    name: str
    price_key: str  # the key of its per-GB-second price in the price table
    wheel_machine: str  # the machine part of its manylinux wheel tags (x86_64, aarch64)
    description: str


ARCHITECTURES: Registry[Architecture] = Registry("Lambda architecture")
ARCHITECTURES.register("x86_64", Architecture("x86_64", "x86_64", "x86_64", "Intel/AMD x86-64"))
ARCHITECTURES.register("arm64", Architecture("arm64", "arm64", "aarch64", "AWS Graviton (Arm)"))

DEFAULT_ARCHITECTURE = "x86_64"
