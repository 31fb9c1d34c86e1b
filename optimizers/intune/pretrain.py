"""Pre-train the InTune agent on the simulator, across random pipelines and node sizes.

    python -m optimizers.intune.pretrain --steps 60000 --out optimizers/intune/pretrained/agent

Each episode draws a pipeline kind (read-, parse- or transform-bound), a node (8/32/64/96
vCPUs), a calibration error (the agent sees a perturbed model, the reward comes from the true
one) and a start (the space's initial configuration or a random safe one). The result is saved as
``<out>.npz`` + ``<out>.json`` (no pickle) and is small enough to commit.
"""

from __future__ import annotations

import argparse
import time
from dataclasses import replace
from pathlib import Path

import numpy as np

from optimizers.intune.agent import DQNConfig, MaskedDQN
from optimizers.intune.env import InTuneEnv

PRETRAINED = Path(__file__).with_name("pretrained") / "agent"


def pretrain(
    steps: int,
    *,
    seed: int = 0,
    config: DQNConfig | None = None,
    time_limit_s: float | None = None,
    progress: bool = False,
) -> MaskedDQN:
    """Train a masked DQN for ``steps`` environment steps (or until ``time_limit_s``)."""
    cfg = config or DQNConfig()
    cfg = replace(cfg, eps_decay_steps=min(cfg.eps_decay_steps, max(1, int(steps * 0.6))))
    agent = MaskedDQN(cfg, seed=seed)
    env = InTuneEnv()
    obs, info = env.reset(seed=seed)
    mask = info["action_mask"]
    start = time.monotonic()
    episodes, returns, ret = 0, [], 0.0
    bar = None
    if progress:
        from tqdm import tqdm

        bar = tqdm(total=steps, desc="pretrain InTune", unit="step")
    done_steps = 0
    for t in range(steps):
        a = agent.act(obs, mask, agent.epsilon(t))
        next_obs, reward, terminated, truncated, info = env.step(a)
        next_mask = info["action_mask"]
        agent.remember(obs, a, reward, next_obs, terminated, next_mask)
        ret += reward
        if t % cfg.train_every == 0:
            agent.learn()
        obs, mask = next_obs, next_mask
        if terminated or truncated:
            episodes += 1
            returns.append(ret)
            ret = 0.0
            obs, info = env.reset()
            mask = info["action_mask"]
        done_steps = t + 1
        if bar is not None and t % 500 == 0:
            bar.update(500 if t else 0)
            bar.set_postfix(ret=f"{np.mean(returns[-100:]) if returns else 0:.2f}")
        if time_limit_s is not None and time.monotonic() - start > time_limit_s:
            break
    if bar is not None:
        bar.close()
    agent.info = {
        "trained_on": "simulator: random read/parse/transform-bound DLRM-like pipelines on 8/32/64/96-vCPU nodes",
        "env_steps": done_steps,
        "episodes": episodes,
        "mean_return_last_100": float(np.mean(returns[-100:])) if returns else None,
        "train_s": round(time.monotonic() - start, 1),
        "seed": seed,
    }
    return agent


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--steps", type=int, default=60_000)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--out", type=Path, default=PRETRAINED)
    p.add_argument("--time-limit-s", type=float, default=None)
    args = p.parse_args(argv)
    import torch

    torch.set_num_threads(1)
    agent = pretrain(args.steps, seed=args.seed, time_limit_s=args.time_limit_s, progress=True)
    npz, spec = agent.save(args.out)
    print(f"saved {npz} ({npz.stat().st_size // 1024} KiB) and {spec}; {agent.info}")


if __name__ == "__main__":
    main()
