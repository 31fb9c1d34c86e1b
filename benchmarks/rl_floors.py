"""Floors for the PPO runtime's phases, measured in the same run as the throughput.

* **Rollout floor**: raw env stepping with a random policy over the same envs and the
  same cores as the rollout phase: ``parallel_envs`` envs of ``steps_per_env`` steps,
  dealt round-robin to ``lanes`` processes (one per core, as the local emulator's
  workers), each stepping its envs one after another; episodes that end are reset, as in a
  rollout. The floor is the slowest lane's stepping time (the critical path): no policy,
  no buffers, no encoding, no dispatch.
* **Update floor**: a minimal fused PPO update over the same minibatches: the same
  actor-critic and fused Adam, the same batch size, minibatch size and epochs, one loss
  (clipped surrogate + value loss, advantages normalised per minibatch), backward, global
  gradient-norm clipping and a step; minibatch indices drawn up front, no statistics.

Each floor is timed ``repeats`` times and the median is reported (measured wall seconds, and
CPU seconds: the slowest lane's process time, the update's thread time).
"""

from __future__ import annotations

import statistics
import time
from concurrent.futures import ProcessPoolExecutor
from multiprocessing import get_context
from typing import Any


def step_randomly(env_id: str, steps: list[int], seed: int) -> tuple[float, float]:
    """Wall and CPU seconds to step one env per entry of ``steps`` (that many steps each) with random actions."""
    from serverless.envs import make_env

    envs = [make_env(env_id, {}, disable_env_checker=True) for _ in steps]
    for k, env in enumerate(envs):
        env.reset(seed=seed + k)
        env.action_space.seed(seed + k)
    samples = [[env.action_space.sample() for _ in range(n)] for env, n in zip(envs, steps)]  # drawn before the clock
    t0, c0 = time.perf_counter(), time.process_time()
    for env, actions in zip(envs, samples):
        for action in actions:
            _, _, terminated, truncated, _ = env.step(action)
            if terminated or truncated:
                env.reset()
    return time.perf_counter() - t0, time.process_time() - c0


def rollout_floor_s(env_id: str, parallel_envs: int, steps_per_env: int, lanes: int, repeats: int, seed: int = 0) -> dict[str, Any]:
    """Median over ``repeats`` of the slowest lane's random-stepping time."""
    dealt = [[steps_per_env for k in range(parallel_envs) if k % lanes == lane] for lane in range(lanes)]
    runs, cpu = [], []
    with ProcessPoolExecutor(max_workers=lanes, mp_context=get_context("spawn")) as pool:
        list(pool.map(step_randomly, [env_id] * lanes, [[1]] * lanes, range(lanes)))  # start-up and imports: not timed
        for r in range(repeats):
            timed = list(pool.map(step_randomly, [env_id] * lanes, dealt, [seed + 100 * r + lane for lane in range(lanes)]))
            runs.append(max(wall for wall, _ in timed))
            cpu.append(max(c for _, c in timed))
    return {"seconds": statistics.median(runs), "runs_s": [round(x, 4) for x in runs],
            "cpu_seconds": statistics.median(cpu), "env_steps": parallel_envs * steps_per_env, "lanes": lanes,
            "label": "measured"}


def _fused_update(model: Any, optimizer: Any, data: dict[str, Any], orders: list[Any], minibatch: int,
                  clip: float, vf_coef: float, max_grad_norm: float) -> None:
    import torch

    params = list(model.parameters())
    n = len(data["obs"])
    for order in orders:
        shuffled = {k: v[order] for k, v in data.items()}
        for start in range(0, n - minibatch // 2, minibatch):
            end = start + minibatch if n - (start + minibatch) >= minibatch // 2 else n
            mb = {k: v[start:end] for k, v in shuffled.items()}
            logp, _, value = model.evaluate(mb["obs"], mb["actions"], with_entropy=False)
            ratio = (logp - mb["logprobs"]).exp()
            adv = (mb["advantages"] - mb["advantages"].mean()) / (mb["advantages"].std() + 1e-8)
            loss = torch.max(-adv * ratio, -adv * ratio.clamp(1 - clip, 1 + clip)).mean() \
                + vf_coef * 0.5 * (value - mb["returns"]).pow(2).mean()
            optimizer.zero_grad(set_to_none=True)
            loss.backward()
            torch.nn.utils.clip_grad_norm_(params, max_grad_norm, foreach=True)
            optimizer.step()


def update_floor_s(env_id: str, batch: int, minibatch: int, epochs: int, hidden: tuple[int, ...], lr: float,
                   clip: float, vf_coef: float, max_grad_norm: float, repeats: int, seed: int = 0) -> dict[str, Any]:
    """Median over ``repeats`` of a minimal fused PPO update's wall time."""
    import torch

    from serverless.envs import inspect_env
    from serverless.torch_policy import ActorCritic

    spec = inspect_env(env_id, hidden=hidden)
    gen = torch.Generator().manual_seed(seed)
    model = ActorCritic(spec)
    optimizer = torch.optim.Adam(model.parameters(), lr=lr, eps=1e-5, fused=True)
    obs = torch.randn(batch, spec.obs_dim, generator=gen)
    actions = torch.randint(0, max(spec.act_dim, 2), (batch,), generator=gen) if spec.action_kind == "discrete" \
        else torch.randn(batch, spec.act_dim, generator=gen)
    with torch.no_grad():
        logp, _, _ = model.evaluate(obs, actions, with_entropy=False)
    data = {"obs": obs, "actions": actions, "logprobs": logp, "advantages": torch.randn(batch, generator=gen),
            "returns": torch.randn(batch, generator=gen)}
    runs, cpu = [], []
    for _ in range(repeats):
        orders = [torch.randperm(batch, generator=gen) for _ in range(epochs)]
        t0, c0 = time.perf_counter(), time.thread_time()
        _fused_update(model, optimizer, data, orders, minibatch, clip, vf_coef, max_grad_norm)
        runs.append(time.perf_counter() - t0)
        cpu.append(time.thread_time() - c0)
    return {"seconds": statistics.median(runs), "runs_s": [round(x, 4) for x in runs],
            "cpu_seconds": statistics.median(cpu),
            "minibatch_updates_per_epoch": len(range(0, batch - minibatch // 2, minibatch)), "label": "measured"}
