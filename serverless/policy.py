"""The actor-critic policy: torch for the learner, plain numpy for the actors.

The learner trains an :class:`ActorCritic` in torch. Before each round of rollouts it
exports the parameters with :func:`export_numpy` and ships them as an ``.npz`` blob
(:func:`encode_weights`); a rollout function rebuilds the same network as a
:class:`NumpyPolicy`, so it needs only numpy and gymnasium (small enough for a
Lambda zip, and fast for single observations, where torch's per-call overhead
dominates).

Network: separate actor and critic MLPs of the same widths and activation
(:class:`serverless.network.NetworkSpec`, 64x64 tanh by default), orthogonal
initialisation with a small gain on the policy head (as in CleanRL and SB3). Discrete
actions use a categorical over logits; continuous actions a diagonal Gaussian with a
state-independent learned log-std. Continuous actions are clipped to the action
bounds by the actor before stepping the env; the unclipped sample is what is stored
and scored.

Weights never travel as pickle: :func:`decode_weights` loads with
``allow_pickle=False``.
"""

from __future__ import annotations

import base64
import io
from dataclasses import dataclass, field, replace
from typing import Any, Literal

import numpy as np

from serverless.network import NetworkSpec, forward
from serverless.rollout_event import PolicySpecJson, RolloutEvent, RolloutReply

ActionKind = Literal["discrete", "continuous"]


@dataclass(frozen=True)
class PolicySpec:
    """The shape of a policy: what an actor needs to rebuild it from arrays."""

    obs_dim: int
    action_kind: ActionKind
    act_dim: int
    network: NetworkSpec = NetworkSpec()
    action_low: tuple[float, ...] | None = None
    action_high: tuple[float, ...] | None = None

    def __post_init__(self) -> None:
        if self.action_kind not in ("discrete", "continuous"):
            raise ValueError(f"action_kind must be 'discrete' or 'continuous', got {self.action_kind!r}")

    def to_dict(self) -> PolicySpecJson:
        """JSON (the rollout event's ``policy_spec``); the network's keys inline."""
        return {
            "obs_dim": self.obs_dim,
            "action_kind": self.action_kind,
            "act_dim": self.act_dim,
            **self.network.to_dict(),
            "action_low": None if self.action_low is None else list(self.action_low),
            "action_high": None if self.action_high is None else list(self.action_high),
        }

    @classmethod
    def from_dict(cls, data: PolicySpecJson) -> "PolicySpec":
        low = data.get("action_low")
        high = data.get("action_high")
        return cls(
            obs_dim=int(data["obs_dim"]),
            action_kind=data["action_kind"],
            act_dim=int(data["act_dim"]),
            network=NetworkSpec.from_dict({k: data[k] for k in ("hidden", "activation") if k in data}),
            action_low=None if low is None else tuple(float(x) for x in low),
            action_high=None if high is None else tuple(float(x) for x in high),
        )

    def with_network(self, network: NetworkSpec) -> "PolicySpec":
        return replace(self, network=network)



# --------------------------------------------------------------------------- numpy side

def encode_weights(arrays: dict[str, np.ndarray]) -> bytes:
    """Arrays -> ``.npz`` bytes (uncompressed: the weights are small, speed matters)."""
    buf = io.BytesIO()
    np.savez(buf, **arrays)
    return buf.getvalue()


def decode_weights(blob: bytes) -> dict[str, np.ndarray]:
    """``.npz`` bytes -> arrays; never unpickles."""
    with np.load(io.BytesIO(blob), allow_pickle=False) as data:
        return {name: data[name] for name in data.files}


def encode_b64(arrays: dict[str, np.ndarray]) -> str:
    """Arrays -> base64 of their ``.npz`` (weights in events, trajectories in results)."""
    return base64.b64encode(encode_weights(arrays)).decode("ascii")


def decode_b64(text: str) -> dict[str, np.ndarray]:
    """The inverse of :func:`encode_b64`; never unpickles."""
    return decode_weights(base64.b64decode(text))


def decode_npz_field(payload: RolloutEvent | RolloutReply, stem: str) -> dict[str, np.ndarray]:
    """Arrays carried in ``payload`` inline (``<stem>_npz_b64``) or by reference
    (``<stem>_s3: {bucket, key}``, fetched with ``serverless.s3_payload``, imported
    only then because it needs boto3). Used for event weights and result trajectories."""
    if f"{stem}_npz_b64" in payload:
        return decode_b64(payload[f"{stem}_npz_b64"])
    if f"{stem}_s3" in payload:
        from serverless import s3_payload

        ref = payload[f"{stem}_s3"]
        return decode_weights(s3_payload.get_bytes(ref["bucket"], ref["key"]))
    raise ValueError(f"needs '{stem}_npz_b64' or '{stem}_s3'")


@dataclass
class NumpyPolicy:
    """The exported policy, evaluated with numpy only (one observation at a time).

    Per step the cost is numpy's per-call overhead, not flops, so a step makes as few
    numpy calls as it can: the layers write into preallocated buffers, and a rollout
    draws all its random numbers up front (:meth:`draws`, then :meth:`act_drawn`), which
    gives the very numbers, in the same order, as one draw per step (:meth:`act`).

    ``arrays`` hold ``actor.{i}.w/b``, ``critic.{i}.w/b`` (``w`` as [in, out]) and,
    for continuous actions, ``log_std``.
    """

    spec: PolicySpec
    arrays: dict[str, np.ndarray]
    _layers: list[tuple[np.ndarray, np.ndarray]] = field(init=False, repr=False)

    def __post_init__(self) -> None:
        layers = len(self.spec.network.hidden) + 1
        try:
            actor = [(self.arrays[f"actor.{i}.w"], self.arrays[f"actor.{i}.b"]) for i in range(layers)]
            critic = [(self.arrays[f"critic.{i}.w"], self.arrays[f"critic.{i}.b"]) for i in range(layers)]
        except KeyError as exc:
            raise ValueError(f"weights do not match the policy spec: missing {exc}") from None
        if actor[0][0].shape[0] != self.spec.obs_dim:
            raise ValueError(f"weights expect obs_dim {actor[0][0].shape[0]}, policy spec says {self.spec.obs_dim}")
        # Fuse the two networks into one of twice the width (first layer side by side,
        # later layers block-diagonal): three small matmuls per step instead of six.
        # Single-observation numpy is bound by per-call overhead, not by flops.
        fused = [(np.hstack([actor[0][0], critic[0][0]]), np.concatenate([actor[0][1], critic[0][1]]))]
        for (aw, ab), (cw, cb) in zip(actor[1:], critic[1:]):
            w = np.zeros((aw.shape[0] + cw.shape[0], aw.shape[1] + cw.shape[1]), dtype=np.float32)
            w[: aw.shape[0], : aw.shape[1]] = aw
            w[aw.shape[0] :, aw.shape[1] :] = cw
            fused.append((w, np.concatenate([ab, cb]).astype(np.float32)))
        self._layers = [(w.astype(np.float32), b.astype(np.float32)) for w, b in fused]
        self._buffers = [np.empty(w.shape[1], dtype=np.float32) for w, _ in self._layers]
        self._act = self.spec.network.act.numpy
        self._std = np.exp(self.arrays["log_std"]) if self.spec.action_kind == "continuous" else None
        self._log_std_sum = float(np.sum(self.arrays["log_std"])) if self._std is not None else 0.0

    def _forward(self, obs: np.ndarray) -> np.ndarray:
        """[actor output..., value] for one observation, in a buffer the next call overwrites."""
        # np.dot: the same sums as matmul, with less dispatch per call
        return forward(np.asarray(obs, dtype=np.float32), self._layers, self._act, outs=self._buffers, product=np.dot)

    def value(self, obs: np.ndarray) -> float:
        return float(self._forward(obs)[-1])

    def draws(self, rng: np.random.Generator, steps: int) -> Any:
        """The random numbers of ``steps`` actions: a list of uniforms (discrete) or a
        [steps, act_dim] float32 array of standard normals (continuous)."""
        if self.spec.action_kind == "discrete":
            return rng.random(steps).tolist()
        return rng.standard_normal((steps, self.spec.act_dim)).astype(np.float32)

    def act(self, obs: np.ndarray, rng: np.random.Generator) -> tuple[Any, float, float]:
        """Sample an action: returns (action, log-probability, value estimate)."""
        return self.act_drawn(obs, self.draws(rng, 1)[0])

    def act_drawn(self, obs: np.ndarray, draw: Any) -> tuple[Any, float, float]:
        """:meth:`act` with its random number already drawn (one entry of :meth:`draws`)."""
        y = self._forward(obs)
        value = float(y[-1])
        out = y[:-1]
        if self.spec.action_kind == "discrete":
            z = out - max(out.tolist())
            p = np.exp(z)
            total = p.sum()
            action = _inverse_cdf(p.tolist(), draw * total)
            return action, float(z[action] - np.log(total)), value
        noise = draw
        action = out + self._std * noise
        logp = float(-0.5 * np.dot(noise, noise) - self._log_std_sum - 0.5 * out.shape[0] * np.log(2 * np.pi))
        return action.astype(np.float32), logp, value


def _inverse_cdf(p: list[float], threshold: Any) -> int:
    """``min(searchsorted(cumsum(p), threshold), len(p) - 1)`` for float32 ``p`` given as
    Python floats, without numpy's per-call overhead: the first index whose float32 running
    sum reaches ``threshold``. Each sum is rounded to float32 as numpy's is (a double sum of
    two float32 values rounds to the float32 sum exactly), so the index is numpy's."""
    running = 0.0
    for i, x in enumerate(p):
        running = x if i == 0 else float(np.float32(running + x))
        if running >= threshold:
            return i
    return len(p) - 1


# --------------------------------------------------------------------------- torch side

def export_numpy(model: Any) -> dict[str, np.ndarray]:
    """The model's parameters as float32 numpy arrays, named for :class:`NumpyPolicy`."""
    return model.export_arrays()
