"""The policy network, defined once: :class:`NetworkSpec` (hidden widths, activation) and each
activation's maths, for numpy and for torch.

Every reader of the network takes it from here: the learner's torch model
(:class:`serverless.torch_policy.ActorCritic`), the actors' numpy policy
(:class:`serverless.policy.NumpyPolicy`), the numpy update engine (which declares which
networks it computes, :func:`serverless.numpy_update.supports`) and, through the learner, the
layout probe. The spec travels in :class:`serverless.ppo.PPOConfig` (``network``) and, for the
actors, in :class:`serverless.policy.PolicySpec`.

The network is a pair of MLPs of the same widths (the actor and the critic), each hidden layer
``act(h W + b)``, the output layer affine. Imports numpy only: the actors load it.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable, TypedDict

import numpy as np

from core.errors import UserError

InPlace = Callable[[np.ndarray], np.ndarray]


def _tanh(z: np.ndarray) -> np.ndarray:
    return np.tanh(z, out=z)


def _relu(z: np.ndarray) -> np.ndarray:
    return np.maximum(z, 0, out=z)


def _elu(z: np.ndarray) -> np.ndarray:
    below = z < 0
    z[below] = np.expm1(z[below])
    return z


def _silu(z: np.ndarray) -> np.ndarray:
    s = np.exp(-z)
    s += 1
    return np.divide(z, s, out=z)


@dataclass(frozen=True)
class Activation:
    """One activation: in place on a float32 array (numpy), its torch function's dotted name,
    and its derivative as a function of its *output* where there is one (``None`` where the
    derivative needs the input, as for SiLU)."""

    name: str
    numpy: InPlace
    torch_name: str
    grad_from_output: Callable[[np.ndarray], np.ndarray] | None

    def torch(self) -> Any:
        """The torch function (``torch.tanh``, ``torch.nn.functional.elu``...)."""
        import torch

        fn: Any = torch
        for part in self.torch_name.split("."):
            fn = getattr(fn, part)
        return fn


ACTIVATIONS: dict[str, Activation] = {
    a.name: a
    for a in (
        Activation("tanh", _tanh, "tanh", lambda a: 1 - a * a),
        Activation("relu", _relu, "relu", lambda a: a > 0),
        Activation("elu", _elu, "nn.functional.elu", lambda a: np.where(a > 0, np.float32(1), a + 1)),
        Activation("silu", _silu, "nn.functional.silu", None),
    )
}


def forward(x: np.ndarray, layers: list[tuple[np.ndarray, np.ndarray]], act: InPlace, *,
            outs: list[np.ndarray] | None = None, keep: list[np.ndarray] | None = None, product: Any = np.matmul) -> np.ndarray:
    """The network's numpy forward pass: ``act(x W + b)`` per hidden layer, the last layer
    affine; returns the output. The numpy update engine (a minibatch through the actor and the
    critic stacked, ``[2, in, out]`` weights) and the actors' policy (one observation through
    the two fused, with ``np.dot`` into preallocated ``outs``) both run it. ``keep`` collects
    every layer's output (the backward pass reads them)."""
    last = len(layers) - 1
    for i, (w, b) in enumerate(layers):
        x = product(x, w, out=None if outs is None else outs[i])
        np.add(x, b, out=x)
        if i < last:
            act(x)
        if keep is not None:
            keep.append(x)
    return x


class NetworkJson(TypedDict):
    """A :class:`NetworkSpec` as JSON (a PPO config's ``network``, a policy spec's keys)."""

    hidden: list[int]
    activation: str


@dataclass(frozen=True)
class NetworkSpec:
    """The actor's and the critic's hidden widths (one or more) and their activation."""

    hidden: tuple[int, ...] = (64, 64)
    activation: str = "tanh"

    def __post_init__(self) -> None:
        hidden = self.hidden
        whole = lambda h: isinstance(h, (int, np.integer)) and not isinstance(h, bool) and h >= 1  # noqa: E731
        if not isinstance(hidden, (tuple, list)) or not hidden or not all(whole(h) for h in hidden):
            raise UserError(f"network: hidden must be one or more whole widths >= 1 (e.g. 64,64), got {hidden!r}")
        object.__setattr__(self, "hidden", tuple(int(h) for h in hidden))
        if self.activation not in ACTIVATIONS:
            raise UserError(f"network: activation must be one of {list(ACTIVATIONS)}, got {self.activation!r}")

    @property
    def act(self) -> Activation:
        return ACTIVATIONS[self.activation]

    def describe(self) -> str:
        """``64x64 tanh``."""
        return f"{'x'.join(map(str, self.hidden))} {self.activation}"

    def to_dict(self) -> NetworkJson:
        return {"hidden": list(self.hidden), "activation": self.activation}

    @classmethod
    def from_dict(cls, data: Any) -> "NetworkSpec":
        if isinstance(data, NetworkSpec):
            return data
        if not isinstance(data, dict) or set(data) - {"hidden", "activation"}:
            raise UserError(f"network must be a mapping with 'hidden' and 'activation', got {data!r}")
        hidden = data.get("hidden", cls.hidden)
        return cls(tuple(hidden) if isinstance(hidden, list) else hidden, data.get("activation", cls.activation))

    def with_text(self, hidden: str | None = None, activation: str | None = None) -> "NetworkSpec":
        """This network with the CLI's ``--hidden`` (comma-separated widths, ``128,64``) and
        ``--activation`` where given; a one-line error for a bad value."""
        widths = self.hidden
        if hidden is not None:
            try:
                widths = tuple(int(w) for w in hidden.split(","))
            except ValueError:
                raise UserError(f"--hidden must be comma-separated whole widths >= 1 (e.g. 128,64), got {hidden!r}") from None
            if any(w < 1 for w in widths):
                raise UserError(f"--hidden must be comma-separated whole widths >= 1 (e.g. 128,64), got {hidden!r}")
        if activation is not None and activation not in ACTIVATIONS:
            raise UserError(f"--activation must be one of {', '.join(ACTIVATIONS)}, got {activation!r}")
        return NetworkSpec(widths, self.activation if activation is None else activation)

