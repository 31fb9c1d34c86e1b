"""Pre-train InTune's agent as a learnt correction of the model, on the suite's training pipelines.

The tuner ranks a move by ``Q(s, a) + model_weight * g(a)``, where ``g(a)`` is the calibrated
model's predicted log gain of the move. This trains ``Q`` to be what the model gets wrong: the
reward of a move is its measured log gain minus ``g(a)`` (a residual), with ``gamma = 0`` (each
move is judged on its own, as the tuner uses it). What a calibration misses is systematic (busy
cores slowing each other, knob effects it cannot see, hand-off costs), and the observation says
where the pipeline stands (each stage's threads and modelled utilisation, memory, CPU use,
progress), so the agent learns when to trust the model's gain and when to discount it.

Each episode draws a *training* member of the suite (:mod:`ingestion.pipelines`; the held-out
members are never seen), a node of 2, 4 or 8 vCPUs, a true pipeline with randomised stage costs
and contention (:func:`~optimizers.intune.env.randomised`) and a calibration-like belief of it
(:func:`~optimizers.intune.env.calibration_like`), then climbs from the model's best or a random
safe configuration, choosing moves epsilon-greedily by ``Q + g`` and keeping a move that measured
better, under measurement noise.

    python -m optimizers.intune.suite_pretrain --time-limit-s 600 --out optimizers/intune/pretrained/agent
"""

from __future__ import annotations

import argparse
import math
import time
from dataclasses import dataclass

import numpy as np

from ingestion.measurement import Measurement
from ingestion.simulator import simulate
from optimizers.intune.agent import DQNConfig, MaskedDQN
from optimizers.intune.env import (ACTIONS, RESIDUAL_CLIP, STOP, Masker, apply_action, calibration_like, observe,
                                   random_start, randomised)
from optimizers.intune.pretrain import PRETRAINED
from optimizers.intune.phases.start import model_best

@dataclass(frozen=True)
class PretrainSettings:
    """How the suite pre-training samples its episodes."""

    vcpus: tuple[int, ...] = (2, 4, 8)
    cost_spread: float = 0.4
    calibration_error: float = 0.3
    noise: float = 0.05
    horizon: int = 16
    random_start: float = 0.5


def residual_config() -> DQNConfig:
    return DQNConfig(hidden=128, lr=5e-4, gamma=0.0, batch_size=128, buffer_size=50_000, target_sync=500,
                     eps_start=1.0, eps_end=0.1, eps_decay_steps=8_000, train_every=2, learning_starts=500)


def predicted_gains(belief, space, node, masker: Masker, config) -> dict[int, float]:
    """The model's predicted log gain of every valid move from ``config``."""
    base = max(simulate(belief, config, node).rows_per_s, 1e-9)
    out = {}
    for a, target in enumerate(masker.targets(config)):
        if target is not None and a != STOP:
            out[a] = math.log(max(simulate(belief, target, node).rows_per_s, 1e-9) / base)
    return out


def episode(agent: MaskedDQN, rng: np.random.Generator, s: PretrainSettings,
            epsilon: float) -> tuple[int, list[tuple[float, float]]]:
    """One training episode; returns (steps taken, [(|residual|, |residual - Q|) per move])."""
    from ingestion.pipelines import members, suite_node

    member = members("train")[int(rng.integers(len(members("train"))))]
    node = suite_node(int(rng.choice(s.vcpus)))
    space = member.space(node)
    truth = randomised(member.model(space), rng, s.cost_spread)
    belief = calibration_like(truth, rng, s.calibration_error)
    masker = Masker(space, node, belief)
    config = random_start(space, masker, rng) if rng.random() < s.random_start else model_best(belief, space, node, masker)[0]
    m = member.simulate(truth, config, node, noise=s.noise, rng=rng)
    if m.failed:
        return 0, []
    start_x = best_x = m.rows_per_s
    residuals, improved = [], False
    for t in range(s.horizon):
        gains = predicted_gains(belief, space, node, masker, config)
        if not gains:
            break
        obs = observe(space, node, belief, config, m, start_rows_per_s=start_x, best_rows_per_s=best_x,
                      progress=t / s.horizon, improved=improved)
        moves = list(gains)
        q = agent.q_values(obs)
        a = int(rng.choice(moves)) if rng.random() < epsilon else max(moves, key=lambda i: q[i] + gains[i])
        target = apply_action(space, config, ACTIONS[a])
        new = member.simulate(truth, target, node, noise=s.noise, rng=rng)
        actual = math.log(max(new.rows_per_s, 1e-9) / max(m.rows_per_s, 1e-9)) if not new.failed else -RESIDUAL_CLIP
        residual = float(np.clip(actual - gains[a], -RESIDUAL_CLIP, RESIDUAL_CLIP))
        residuals.append((abs(residual), abs(residual - float(q[a]))))
        mask = np.zeros(len(ACTIONS), dtype=bool)
        mask[STOP] = True
        agent.remember(obs, a, residual, obs, True, mask)
        if new.failed:
            masker.forbidden.add(Masker.key(target))
            continue
        improved = new.rows_per_s > m.rows_per_s
        if improved:
            config, m = target, new
            best_x = max(best_x, new.rows_per_s)
    return len(residuals), residuals


def pretrain_on_suite(steps: int, *, seed: int = 0, time_limit_s: float | None = None,
                      settings: PretrainSettings = PretrainSettings()) -> MaskedDQN:
    """Train a residual agent for ``steps`` moves (or until ``time_limit_s``)."""
    agent = MaskedDQN(residual_config(), seed=seed)
    rng = np.random.default_rng(seed)
    start = time.monotonic()
    done, episodes, errors = 0, 0, []
    while done < steps and (time_limit_s is None or time.monotonic() - start < time_limit_s):
        n, err = episode(agent, rng, settings, agent.epsilon(done))
        for _ in range(n // 2):
            agent.learn()
        done += n
        episodes += 1
        errors += err
    first, last = np.array(errors[:2000] or [(0.0, 0.0)]), np.array(errors[-2000:] or [(0.0, 0.0)])
    agent.info = {
        "trained_on": "simulator: the suite's training pipelines (dlrm-tsv, wide-tfrecord, rowmap-csv) with randomised "
                      "stage costs and contention, calibration-like beliefs, on 2/4/8-vCPU nodes",
        "target": "residual: measured log gain minus the model's predicted log gain (gamma 0)",
        "env_steps": done, "episodes": episodes,
        # how far the model's gain is off (|residual|) and how far the model + agent is (|residual - Q|),
        # over the first and the last 2,000 moves
        "model_error_first": float(first[:, 0].mean()), "model_plus_agent_error_first": float(first[:, 1].mean()),
        "model_error_last": float(last[:, 0].mean()), "model_plus_agent_error_last": float(last[:, 1].mean()),
        "train_s": round(time.monotonic() - start, 1), "seed": seed,
    }
    return agent


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--steps", type=int, default=40_000)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--time-limit-s", type=float, default=None)
    p.add_argument("--out", default=str(PRETRAINED))
    args = p.parse_args(argv)
    import torch

    torch.set_num_threads(1)
    agent = pretrain_on_suite(args.steps, seed=args.seed, time_limit_s=args.time_limit_s)
    npz, spec = agent.save(args.out)
    print(f"saved {npz} and {spec}: {agent.info}")


if __name__ == "__main__":
    main()
