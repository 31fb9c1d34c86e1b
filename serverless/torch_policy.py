"""The learner's torch actor-critic (see :mod:`serverless.policy` for the design).

Kept apart from :mod:`serverless.policy` so rollout functions never import torch;
``serverless.policy.ActorCritic`` resolves to this class on first use.
"""

from __future__ import annotations

import math

import torch
from torch import nn

from serverless.policy import PolicySpec


def _linear(n_in: int, n_out: int, gain: float) -> nn.Linear:
    layer = nn.Linear(n_in, n_out)
    nn.init.orthogonal_(layer.weight, gain)
    nn.init.zeros_(layer.bias)
    return layer


def _mlp(sizes: list[int], out_gain: float) -> nn.Sequential:
    mods: list[nn.Module] = []
    for n_in, n_out in zip(sizes[:-2], sizes[1:-1]):
        mods += [_linear(n_in, n_out, math.sqrt(2)), nn.Tanh()]
    mods.append(_linear(sizes[-2], sizes[-1], out_gain))
    return nn.Sequential(*mods)


class ActorCritic(nn.Module):
    """Separate actor and critic MLPs (tanh); orthogonal init, 0.01 gain on the policy head."""

    def __init__(self, spec: PolicySpec) -> None:
        super().__init__()
        self.spec = spec
        sizes = [spec.obs_dim, *spec.hidden]
        self.actor = _mlp([*sizes, spec.act_dim], 0.01)
        self.critic = _mlp([*sizes, 1], 1.0)
        if spec.action_kind == "continuous":
            self.log_std = nn.Parameter(torch.zeros(spec.act_dim))

    def value(self, obs: torch.Tensor) -> torch.Tensor:
        return self.critic(obs).squeeze(-1)

    def evaluate(self, obs: torch.Tensor, actions: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """Log-probability of ``actions`` at ``obs``, the policy's entropy there, and the value."""
        out = self.actor(obs)
        if self.spec.action_kind == "discrete":
            logp_all = torch.log_softmax(out, dim=-1)
            logp = logp_all.gather(-1, actions.long().unsqueeze(-1)).squeeze(-1)
            entropy = -(logp_all.exp() * logp_all).sum(-1)
        else:
            z = (actions - out) / self.log_std.exp()
            logp = (-0.5 * z.pow(2) - self.log_std - 0.5 * math.log(2 * math.pi)).sum(-1)
            entropy = (0.5 + 0.5 * math.log(2 * math.pi) + self.log_std).sum().expand(obs.shape[0])
        return logp, entropy, self.value(obs)
