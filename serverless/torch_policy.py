"""The learner's torch actor-critic (see :mod:`serverless.policy` for the design).

Kept apart from :mod:`serverless.policy` so rollout functions never import torch.
The trainer imports it from here; actors use :class:`serverless.policy.NumpyPolicy` alone.

The actor and the critic are two separate MLPs of the same widths, but their
parameters are stored stacked, one ``[2, in, out]`` tensor per layer, and evaluated
with one batched matmul (``baddbmm``) per layer instead of two ``Linear`` calls. The
maths is exactly that of two independent networks; for a 64x64 MLP on minibatches
of ~100 samples, per-kernel overhead dominates, so halving the number of kernels
(forward, backward and optimiser) makes the PPO update markedly faster. The critic's
output layer is padded to the actor's width; the padding columns start at zero and
never receive a gradient.
"""

from __future__ import annotations

import math

import numpy as np
import torch
from torch import nn

from serverless.policy import PolicySpec

ACTOR, CRITIC = 0, 1


def _orthogonal(n_in: int, n_out: int, gain: float) -> torch.Tensor:
    """An ``nn.Linear``-style orthogonal init ([out, in]), returned as [in, out]."""
    w = torch.empty(n_out, n_in)
    nn.init.orthogonal_(w, gain)
    return w.t().contiguous()


class ActorCritic(nn.Module):
    """Separate actor and critic MLPs (``spec.network``: widths and activation); orthogonal
    init, 0.01 gain on the policy head."""

    def __init__(self, spec: PolicySpec) -> None:
        super().__init__()
        self.spec = spec
        sizes = [spec.obs_dim, *spec.network.hidden]
        self._act = spec.network.act.torch()
        self.out_dim = spec.act_dim
        self.weights = nn.ParameterList()
        self.biases = nn.ParameterList()
        for n_in, n_out in zip(sizes[:-1], sizes[1:]):
            w = torch.stack([_orthogonal(n_in, n_out, math.sqrt(2)), _orthogonal(n_in, n_out, math.sqrt(2))])
            self.weights.append(nn.Parameter(w))
            self.biases.append(nn.Parameter(torch.zeros(2, 1, n_out)))
        last = torch.zeros(2, sizes[-1], self.out_dim)
        last[ACTOR] = _orthogonal(sizes[-1], spec.act_dim, 0.01)
        last[CRITIC, :, :1] = _orthogonal(sizes[-1], 1, 1.0)
        self.weights.append(nn.Parameter(last))
        self.biases.append(nn.Parameter(torch.zeros(2, 1, self.out_dim)))
        if spec.action_kind == "continuous":
            self.log_std = nn.Parameter(torch.zeros(spec.act_dim))

    def _heads(self, obs: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """(actor output [B, act_dim], value [B])."""
        h = obs.unsqueeze(0).expand(2, *obs.shape)
        n = len(self.weights)
        for i in range(n - 1):
            h = self._act(torch.baddbmm(self.biases[i], h, self.weights[i]))
        out = torch.baddbmm(self.biases[n - 1], h, self.weights[n - 1])
        return out[ACTOR], out[CRITIC, :, 0]

    def value(self, obs: torch.Tensor) -> torch.Tensor:
        return self._heads(obs)[1]

    def evaluate(
        self, obs: torch.Tensor, actions: torch.Tensor, with_entropy: bool = True
    ) -> tuple[torch.Tensor, torch.Tensor | None, torch.Tensor]:
        """Log-probability of ``actions`` at ``obs``, the policy's entropy there (None
        when not asked for: it costs kernels in the forward and backward pass), and the value."""
        out, value = self._heads(obs)
        entropy = None
        if self.spec.action_kind == "discrete":
            logp_all = torch.log_softmax(out, dim=-1)
            logp = logp_all.gather(-1, actions.long().unsqueeze(-1)).squeeze(-1)
            if with_entropy:
                entropy = -(logp_all.exp() * logp_all).sum(-1)
        else:
            z = (actions - out) / self.log_std.exp()
            logp = (-0.5 * z.pow(2) - self.log_std - 0.5 * math.log(2 * math.pi)).sum(-1)
            if with_entropy:
                entropy = (0.5 + 0.5 * math.log(2 * math.pi) + self.log_std).sum().expand(obs.shape[0])
        return logp, entropy, value

    def export_arrays(self) -> dict[str, np.ndarray]:
        """``actor.{i}.w/b``, ``critic.{i}.w/b`` ([in, out] weights) and ``log_std``, float32."""
        arrays: dict[str, np.ndarray] = {}
        n = len(self.weights)
        with torch.no_grad():
            for i in range(n):
                w = self.weights[i].detach().numpy()
                b = self.biases[i].detach().numpy()[:, 0, :]
                cols = self.out_dim if i == n - 1 else w.shape[2]
                arrays[f"actor.{i}.w"] = np.ascontiguousarray(w[ACTOR, :, :cols], dtype=np.float32)
                arrays[f"actor.{i}.b"] = np.ascontiguousarray(b[ACTOR, :cols], dtype=np.float32)
                ccols = 1 if i == n - 1 else w.shape[2]
                arrays[f"critic.{i}.w"] = np.ascontiguousarray(w[CRITIC, :, :ccols], dtype=np.float32)
                arrays[f"critic.{i}.b"] = np.ascontiguousarray(b[CRITIC, :ccols], dtype=np.float32)
            if hasattr(self, "log_std"):
                arrays["log_std"] = self.log_std.detach().numpy().astype(np.float32).copy()
        return arrays
