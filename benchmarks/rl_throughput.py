"""PPO training throughput: trainwise's trainer vs RLlib (new API stack) vs Stable-Baselines3.

Measures env steps per second of *training* (sampling plus learning) for each framework,
side by side in one process, one after another (never concurrently), on the same env
with the same PPO hyperparameters, and prints the ratios:

* ``ratio``     = trainwise steps/s over RLlib steps/s     (bar: >= 3)
* ``ratio_sb3`` = trainwise steps/s over SB3 steps/s       (bar: >= 3)

For trainwise it also reports where an iteration's time goes (the trainer's per-iteration
breakdown: weight encoding, dispatch, the functions' env stepping and policy inference,
decoding, GAE, the update; :class:`serverless.iteration_clock.PhaseBreakdown`) and, in the
same run, the floors of the two big phases (:mod:`benchmarks.rl_floors`): raw random-policy
env stepping over the same envs and cores, and a minimal fused PPO update over the same
minibatches. ``vs_floor`` is floor time over phase time (1 = at the floor; bars: rollout
>= 0.5, update >= 0.7). ``--breakdown-out`` writes that part alone.

How each framework is timed (the same way for all three):

1. Build the trainer (imports, Ray start-up, env and network construction): not timed.
2. Run one warm-up iteration (one batch of ``batch`` env steps plus its update): not timed.
3. Run ``--iterations`` more iterations; time from the end of the warm-up iteration to
   the end of the last one; throughput = env steps sampled in those iterations / time.

Every framework gets the same torch thread setting (``--torch-threads``, set once for the
process before anything runs), the same 2 cores, batch 4000 (4 envs or actors x 1000
steps), minibatch 128, 10 epochs, separate 64x64 tanh MLPs for policy and value, and
the same loss coefficients (see :class:`SharedPPO`). Each framework's exact configuration
is written to the JSON next to its figure.

Run timing measurements under the shared lock, e.g.::

    flock /tmp/trainwise-bench.lock .venv/bin/python -m benchmarks.rl_throughput --json-out thr.json

With several ``--env`` values the JSON has one entry per env under ``envs`` and the
top-level ``ratio`` / ``ratio_sb3`` are the minimum across envs (the worst case); with a
single env they are that env's ratios.
"""

from __future__ import annotations

import argparse
import math
import os
import sys
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from benchmarks._common import Stopwatch, print_table, progress, ratio, recording_load, set_torch_threads, write_result
from serverless.run_shape import RunShape

ENVS = ("CartPole-v1", "LunarLander-v3")
FRAMEWORKS = ("trainwise", "rllib", "sb3")
BARS = {"ratio": 3.0, "ratio_sb3": 3.0}
FLOOR_BARS = {"rollout": 0.5, "update": 0.7}  # phase at >= this fraction of its floor's speed


@dataclass(frozen=True)
class SharedPPO:
    """The PPO hyperparameters every framework is configured with.

    Sizes come from the issue (batch 4000, minibatch 128, 10 epochs, 64x64 MLP, 4 envs or
    actors); the loss coefficients are the common PPO defaults (CleanRL's and SB3's), set
    explicitly in RLlib too, whose own defaults differ (lr 5e-5, lambda 1.0, clip 0.3, a
    KL penalty and a shared policy/value encoder).
    """

    batch: int = 4000
    minibatch: int = 128
    epochs: int = 10
    hidden: tuple[int, ...] = (64, 64)
    parallel_envs: int = 4
    lr: float = 3e-4
    gamma: float = 0.99
    gae_lambda: float = 0.95
    clip: float = 0.2
    ent_coef: float = 0.0
    vf_coef: float = 0.5
    max_grad_norm: float = 0.5

    @property
    def steps_per_env(self) -> int:
        return self.batch // self.parallel_envs


@dataclass
class Measurement:
    """One framework on one env: measured figures plus the exact configuration used."""

    framework: str
    env_id: str
    timed_env_steps: int
    timed_s: float
    iteration_s: list[float]
    warmup_env_steps: int
    warmup_s: float
    setup_s: float
    config: dict[str, Any]
    load: dict[str, Any] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)
    torch_threads: dict[str, int] = field(default_factory=dict)  # main process, set before the run
    breakdown_s: dict[str, Any] = field(default_factory=dict)  # mean per timed iteration, where known

    @property
    def steps_per_s(self) -> float:
        return self.timed_env_steps / self.timed_s

    def to_dict(self) -> dict[str, Any]:
        out = asdict(self)
        out["env_steps_per_s"] = round(self.steps_per_s, 1)
        out["label"] = "measured"
        return out


class IterationClock:
    """Records (time, cumulative env steps) at the end of each training iteration."""

    def __init__(self) -> None:
        self.marks: list[tuple[float, int]] = []
        self.phases: list[dict[str, float]] = []  # per iteration: sampling_s, learning_s (where known)

    def mark(self, env_steps: int, **phases: float) -> None:
        self.marks.append((time.perf_counter(), env_steps))
        if phases:
            self.phases.append(phases)

    def measurement(self, framework: str, env_id: str, start: float, setup_s: float,
                    config: dict[str, Any], iterations: int, load: dict[str, Any],
                    notes: list[str] | None = None) -> Measurement:
        """Split the marks into the warm-up iteration (first) and the timed ones."""
        if len(self.marks) < iterations + 1:
            raise RuntimeError(f"{framework}: expected {iterations + 1} iterations, saw {len(self.marks)}")
        (t_warm, steps_warm), (t_end, steps_end) = self.marks[0], self.marks[iterations]
        timed_phases = self.phases[1 : iterations + 1]
        breakdown = {k: round(sum(p[k] for p in timed_phases) / len(timed_phases), 4) for k in timed_phases[0]} \
            if len(timed_phases) == iterations else {}
        times = [start] + [t for t, _ in self.marks[: iterations + 1]]
        return Measurement(
            framework=framework, env_id=env_id,
            timed_env_steps=steps_end - steps_warm, timed_s=t_end - t_warm,
            iteration_s=[round(b - a, 3) for a, b in zip(times[1:], times[2:])],
            warmup_env_steps=steps_warm, warmup_s=round(t_warm - start, 3), setup_s=round(setup_s, 3),
            config=config, load=load, notes=notes or [], breakdown_s=breakdown,
        )


# ---------------------------------------------------------------------------------------
# Stable-Baselines3
# ---------------------------------------------------------------------------------------

def measure_sb3(env_id: str, hp: SharedPPO, iterations: int, seed: int) -> Measurement:
    import torch
    from stable_baselines3 import PPO
    from stable_baselines3.common.callbacks import BaseCallback
    from stable_baselines3.common.env_util import make_vec_env

    clock = IterationClock()

    rollout_times: list[tuple[float, float]] = []

    class _Marks(BaseCallback):
        # The end of rollout k's update is the start of rollout k+1; the last iteration
        # ends when learn() returns (marked below).
        def _on_rollout_start(self) -> None:
            now = time.perf_counter()
            if self.model.num_timesteps > 0:
                clock.mark(int(self.model.num_timesteps), **_sb3_phases(now))
            rollout_times.append((now, now))

        def _on_rollout_end(self) -> None:
            rollout_times[-1] = (rollout_times[-1][0], time.perf_counter())

        def _on_step(self) -> bool:
            return True

    def _sb3_phases(now: float) -> dict[str, float]:
        begin, end = rollout_times[-1]
        return {"sampling_s": end - begin, "learning_s": now - end}

    load: dict[str, Any] = {}
    with Stopwatch() as setup:
        vec_env = make_vec_env(env_id, n_envs=hp.parallel_envs, seed=seed)  # DummyVecEnv: in-process
        kwargs = dict(
            n_steps=hp.steps_per_env, batch_size=hp.minibatch, n_epochs=hp.epochs, learning_rate=hp.lr,
            gamma=hp.gamma, gae_lambda=hp.gae_lambda, clip_range=hp.clip, ent_coef=hp.ent_coef,
            vf_coef=hp.vf_coef, max_grad_norm=hp.max_grad_norm, normalize_advantage=True,
            policy_kwargs=dict(net_arch=dict(pi=list(hp.hidden), vf=list(hp.hidden)), activation_fn=torch.nn.Tanh),
            device="cpu", seed=seed, verbose=0,
        )
        model = PPO("MlpPolicy", vec_env, **kwargs)
    config = {"algo": "stable_baselines3.PPO", "policy": "MlpPolicy",
              "vec_env": f"make_vec_env({env_id!r}, n_envs={hp.parallel_envs}) -> DummyVecEnv",
              **{k: v for k, v in kwargs.items() if k != "policy_kwargs"},
              "net_arch": {"pi": list(hp.hidden), "vf": list(hp.hidden)}, "activation_fn": "Tanh",
              "clip_range_vf": None, "target_kl": None}
    with recording_load(load):
        start = time.perf_counter()
        model.learn(total_timesteps=hp.batch * (iterations + 1), callback=_Marks())
        clock.mark(int(model.num_timesteps), **_sb3_phases(time.perf_counter()))
    vec_env.close()
    return clock.measurement("sb3", env_id, start, setup.seconds, config, iterations, load)


# ---------------------------------------------------------------------------------------
# RLlib (new API stack: RLModule + Learner + EnvRunner + ConnectorV2)
# ---------------------------------------------------------------------------------------

def measure_rllib(env_id: str, hp: SharedPPO, iterations: int, seed: int) -> Measurement:
    import ray
    from ray.rllib.algorithms.ppo import PPOConfig
    from ray.rllib.core.rl_module.default_model_config import DefaultModelConfig

    clock = IterationClock()
    load: dict[str, Any] = {}
    with Stopwatch() as setup:
        ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False, configure_logging=False)
        model_config = DefaultModelConfig(fcnet_hiddens=list(hp.hidden), fcnet_activation="tanh",
                                          vf_share_layers=False)
        training = dict(
            train_batch_size_per_learner=hp.batch, minibatch_size=hp.minibatch, num_epochs=hp.epochs,
            lr=hp.lr, gamma=hp.gamma, lambda_=hp.gae_lambda, clip_param=hp.clip,
            entropy_coeff=hp.ent_coef, vf_loss_coeff=hp.vf_coef, grad_clip=hp.max_grad_norm,
            grad_clip_by="global_norm", use_kl_loss=False, vf_clip_param=float("inf"),
        )
        config = (
            PPOConfig()
            .environment(env_id)
            .framework("torch")
            .env_runners(num_env_runners=1, num_envs_per_env_runner=hp.parallel_envs,
                         gym_env_vectorize_mode="sync", num_cpus_per_env_runner=1)
            .learners(num_learners=0)
            .training(**training)
            .rl_module(model_config=model_config)
            .debugging(seed=seed)
        )
        algo = config.build_algo()
    described = {
        "algo": "ray.rllib PPO (new API stack)", "api_stack": "new (RLModule/Learner, EnvRunner/ConnectorV2)",
        "enable_rl_module_and_learner": config.enable_rl_module_and_learner,
        "enable_env_runner_and_connector_v2": config.enable_env_runner_and_connector_v2,
        "ray.init": {"num_cpus": 2, "include_dashboard": False},
        "num_env_runners": 1, "num_envs_per_env_runner": hp.parallel_envs, "gym_env_vectorize_mode": "sync",
        "num_learners": 0, "rollout_fragment_length": config.get_rollout_fragment_length(),
        **{k: (None if isinstance(v, float) and math.isinf(v) else v) for k, v in training.items()},
        "vf_clip_param_note": "inf (no value clipping, as SB3's default)",
        "model_config": {"fcnet_hiddens": list(hp.hidden), "fcnet_activation": "tanh", "vf_share_layers": False},
    }
    try:
        with recording_load(load):
            start = time.perf_counter()
            for _ in range(iterations + 1):
                result = algo.train()
                clock.mark(int(result["env_runners"]["num_env_steps_sampled_lifetime"]))
    finally:
        algo.stop()
        ray.shutdown()
    notes = ["learner runs in the driver process (num_learners=0); sampling runs in one EnvRunner actor process",
             f"RLlib's own timers after the last iteration (smoothed by RLlib, not per iteration): "
             f"{ {k: round(v, 4) for k, v in result.get('timers', {}).items() if isinstance(v, (int, float))} }"]
    return clock.measurement("rllib", env_id, start, setup.seconds, described, iterations, load, notes)


# ---------------------------------------------------------------------------------------
# trainwise (the project's trainer, local backend)
# ---------------------------------------------------------------------------------------

def measure_trainwise(env_id: str, hp: SharedPPO, iterations: int, seed: int) -> Measurement:
    from serverless.backends.local import LocalBackend
    from serverless.network import NetworkSpec
    from serverless.ppo import PPOConfig
    from serverless.trainer import IterationRecord, TrainSpec, train

    clock = IterationClock()

    class _Marks:
        """A controller that never changes the configuration; it only timestamps iterations."""

        def after_iteration(self, record: IterationRecord) -> RunShape | None:
            assert record.breakdown is not None
            phases = record.breakdown.to_dict()["phases_s"]
            rollout = sum(phases[k] for k in ROLLOUT_PHASES)
            in_function = phases["function_env_s"] + phases["function_policy_s"]
            cpu_share = record.rollout.get("handler_cpu_share") or 0.0
            clock.mark(record.env_steps, sampling_s=rollout, learning_s=phases["update_s"],
                       iteration_s=record.breakdown.iteration_s, update_cpu_s=record.learner_cpu_s,
                       rollout_in_function_cpu_s=in_function * cpu_share, **phases)
            return None

    load: dict[str, Any] = {}
    with Stopwatch() as setup:
        ppo = PPOConfig(
            learning_rate=hp.lr, anneal_lr=False, gamma=hp.gamma, gae_lambda=hp.gae_lambda, clip_coef=hp.clip,
            clip_vloss=False, ent_coef=hp.ent_coef, vf_coef=hp.vf_coef, max_grad_norm=hp.max_grad_norm,
            epochs=hp.epochs, minibatch_size=hp.minibatch, norm_adv=True, target_kl=None, network=NetworkSpec(hp.hidden),
            torch_threads=None,  # keep the process setting (--torch-threads), as for RLlib and SB3
        )
        run = RunShape(actors=hp.parallel_envs, memory_mb=1769, batch=hp.batch)
        # target_reward is out of reach so every run does exactly iterations + 1 batches;
        # no checkpoints (the other frameworks write none either).
        spec = TrainSpec(env_id=env_id, target_reward=1e12, max_steps=hp.batch * (iterations + 1),
                         run=run, ppo=ppo, seed=seed, backend="local", checkpoint_every=0)
        backend = LocalBackend()
    config = {
        "algo": "trainwise serverless.trainer.train (PPO actor-learner)",
        "backend": "local (Lambda emulator: persistent worker processes, one per core)",
        "backend_workers": backend.max_workers, "run": run.to_dict(), "ppo": ppo.to_dict(),
        "memory_mb_note": "1769 MB = one full vCPU, so the duty-cycle throttle is off",
    }
    try:
        with recording_load(load):
            start = time.perf_counter()
            result = train(spec, backend=backend, controller=_Marks(), progress=False)
    finally:
        backend.close()
    notes = [f"stop_reason={result.stop_reason}", *result.notes]
    return clock.measurement("trainwise", env_id, start, setup.seconds, config, iterations, load, notes)


ROLLOUT_PHASES = ("dispatch_s", "function_env_s", "function_policy_s", "function_other_s")


def floors(env_id: str, hp: SharedPPO, repeats: int, lanes: int, seed: int) -> dict[str, Any]:
    """Both floors for ``env_id``, measured now (:mod:`benchmarks.rl_floors`)."""
    from benchmarks.rl_floors import rollout_floor_s, update_floor_s

    return {
        "rollout": rollout_floor_s(env_id, hp.parallel_envs, hp.steps_per_env, lanes, repeats, seed),
        "update": update_floor_s(env_id, hp.batch, hp.minibatch, hp.epochs, hp.hidden, hp.lr, hp.clip,
                                 hp.vf_coef, hp.max_grad_norm, repeats, seed),
    }


def breakdown_summary(m: Measurement, floor: dict[str, Any] | None) -> dict[str, Any]:
    """trainwise's mean timed iteration by phase, its shares, and each big phase against its floor."""
    not_phases = ("sampling_s", "learning_s", "iteration_s", "update_cpu_s", "rollout_in_function_cpu_s")
    phases = {k: v for k, v in m.breakdown_s.items() if k not in not_phases}
    iteration = m.breakdown_s["iteration_s"]
    between = max(0.0, m.timed_s / len(m.iteration_s) - iteration)
    phases["between_iterations_s"] = round(between, 4)  # the clock's metronome and the benchmark's hook
    total = sum(phases.values())
    rollout = sum(phases[k] for k in ROLLOUT_PHASES)
    out: dict[str, Any] = {
        "env_id": m.env_id, "env_steps_per_iteration": m.timed_env_steps // len(m.iteration_s),
        "mean_iteration_s": round(total, 4), "phases_s": phases,
        "shares": {k: round(v / total, 4) for k, v in phases.items()},
        "rollout_s": round(rollout, 4), "update_s": phases["update_s"], "label": "measured",
    }
    if floor is not None:
        out["floors"] = floor
        out["vs_floor"] = {
            "rollout": round(floor["rollout"]["seconds"] / rollout, 3),
            "rollout_in_function": round(floor["rollout"]["seconds"] / (phases["function_env_s"] + phases["function_policy_s"]), 3),
            "update": round(floor["update"]["seconds"] / phases["update_s"], 3),
        }
        # CPU time, less sensitive to other jobs than wall time: the update's thread time, and the
        # critical lane's in-function time x the handlers' CPU share (an estimate of its CPU time)
        out["vs_floor_cpu"] = {
            "rollout_in_function": _ratio_or_none(floor["rollout"]["cpu_seconds"], m.breakdown_s.get("rollout_in_function_cpu_s")),
            "update": _ratio_or_none(floor["update"]["cpu_seconds"], m.breakdown_s.get("update_cpu_s")),
        }
        out["floor_bars"] = FLOOR_BARS
        out["floor_bars_met"] = {k: out["vs_floor"][k] >= bar for k, bar in FLOOR_BARS.items()}
    return out


def _ratio_or_none(floor_s: float, phase_s: float | None) -> float | None:
    return round(floor_s / phase_s, 3) if phase_s else None


def torch_intra_op_threads() -> int:
    import torch

    return torch.get_num_threads()


MEASURERS: dict[str, Callable[[str, SharedPPO, int, int], Measurement]] = {
    "trainwise": measure_trainwise, "rllib": measure_rllib, "sb3": measure_sb3,
}


# ---------------------------------------------------------------------------------------
# CLI
# ---------------------------------------------------------------------------------------

def _parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--env", action="append", choices=ENVS, dest="envs",
                        help="env to measure; repeat for several (default: both)")
    parser.add_argument("--iterations", type=int, default=5,
                        help="timed iterations per framework after one warm-up iteration (default 5)")
    parser.add_argument("--quick", action="store_true",
                        help="smoke run: 1 timed iteration, CartPole-v1 only unless --env is given")
    parser.add_argument("--frameworks", default=",".join(FRAMEWORKS),
                        help=f"comma-separated subset of {','.join(FRAMEWORKS)} (ratios need trainwise)")
    parser.add_argument("--torch-threads", type=int, default=1,
                        help="torch intra-op threads for every framework's process (default 1)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--json-out", type=Path, help="write the result as JSON here")
    parser.add_argument("--breakdown-out", type=Path,
                        help="write trainwise's per-phase breakdown and floors as JSON here "
                             "(e.g. benchmarks/results/rl-throughput-breakdown-DATE.json)")
    parser.add_argument("--no-floors", action="store_true", help="skip measuring the rollout and update floors")
    args = parser.parse_args(argv)
    frameworks = [f.strip() for f in args.frameworks.split(",") if f.strip()]
    unknown = sorted(set(frameworks) - set(FRAMEWORKS))
    if unknown or not frameworks:
        parser.error(f"--frameworks: unknown {unknown}; allowed: {', '.join(FRAMEWORKS)}")
    if args.iterations < 1:
        parser.error("--iterations must be >= 1")
    if args.torch_threads < 1:
        parser.error("--torch-threads must be >= 1")
    args.frameworks = frameworks
    if args.quick:
        args.iterations = 1
    if not args.envs:
        args.envs = ["CartPole-v1"] if args.quick else list(ENVS)
    return args


def _env_summary(measurements: dict[str, Measurement]) -> dict[str, Any]:
    def sps(name: str) -> float | None:
        return measurements[name].steps_per_s if name in measurements else None

    return {
        "env_steps_per_s": {name: round(m.steps_per_s, 1) for name, m in measurements.items()},
        "ratio": ratio(sps("trainwise"), sps("rllib")),
        "ratio_sb3": ratio(sps("trainwise"), sps("sb3")),
        "frameworks": {name: m.to_dict() for name, m in measurements.items()},
    }


def _worst(per_env: dict[str, dict[str, Any]], key: str) -> float | None:
    values = [entry[key] for entry in per_env.values()]
    return None if any(v is None for v in values) else min(values)


def _measure_env(env_id: str, args: argparse.Namespace, hp: SharedPPO) -> tuple[dict[str, Any], dict[str, Any] | None]:
    """Every framework on ``env_id``, the floors right after trainwise (close in time to the
    phases they are compared with); the env's summary and trainwise's breakdown."""
    measurements: dict[str, Measurement] = {}
    floor = None
    for name in args.frameworks:
        progress(f"{env_id}: {name}: 1 warm-up + {args.iterations} timed iterations of {hp.batch} steps")
        applied = set_torch_threads(args.torch_threads)  # again: a framework may have changed it
        measurements[name] = MEASURERS[name](env_id, hp, args.iterations, args.seed)
        measurements[name].torch_threads = {**applied, "intra_op_after_run": torch_intra_op_threads()}
        progress(f"{env_id}: {name}: {measurements[name].steps_per_s:,.0f} env steps/s")
        if name == "trainwise" and not args.no_floors:
            progress(f"{env_id}: floors: random-policy env stepping and a minimal fused PPO update, "
                     f"{args.iterations} times each")
            set_torch_threads(args.torch_threads)
            lanes = min(measurements[name].config["backend_workers"], hp.parallel_envs)
            floor = floors(env_id, hp, args.iterations, lanes, args.seed)
    summary = _env_summary(measurements)
    return summary, (breakdown_summary(measurements["trainwise"], floor) if "trainwise" in measurements else None)


def _print_tables(per_env: dict[str, dict[str, Any]], breakdowns: dict[str, dict[str, Any]],
                  args: argparse.Namespace, threads: dict[str, int]) -> None:
    rows = []
    for env_id, entry in per_env.items():
        for name, m in entry["frameworks"].items():
            phases = m["breakdown_s"]
            load = (m["load"]["load_before"]["loadavg_1m"] + m["load"]["load_after"]["loadavg_1m"]) / 2
            rows.append([env_id, name, m["timed_env_steps"], m["timed_s"], m["env_steps_per_s"],
                         phases.get("sampling_s"), phases.get("learning_s"), load])
    print_table(["env", "framework", "timed env steps", "timed s", "env steps/s", "sampling s/iter",
                 "learning s/iter", "load avg"], rows, digits=2,
                title=f"PPO training throughput (measured; {args.iterations} timed iterations after 1 warm-up, "
                      f"torch threads {threads['intra_op']})")
    print()
    print_table(["env", "trainwise/RLlib", "trainwise/SB3"],
                [[env_id, e["ratio"], e["ratio_sb3"]] for env_id, e in per_env.items()], digits=2,
                title=f"Ratios (bars: RLlib >= {BARS['ratio']}, SB3 >= {BARS['ratio_sb3']})")
    for env_id, b in breakdowns.items():
        print()
        floor = b.get("vs_floor", {})
        print_table(["phase", "s/iter", "share"],
                    [[k, v * 1000.0, b["shares"][k]] for k, v in b["phases_s"].items()], digits=3,
                    title=f"trainwise {env_id}: mean timed iteration by phase (measured, ms), "
                          f"rollout {floor.get('rollout', '-')}x and update {floor.get('update', '-')}x their floors "
                          f"(CPU time: {b.get('vs_floor_cpu')})")


def main(argv: list[str] | None = None) -> int:
    args = _parse_args(argv)
    os.environ.setdefault("RAY_DEDUP_LOGS", "0")
    threads = set_torch_threads(args.torch_threads)
    hp = SharedPPO()
    per_env: dict[str, dict[str, Any]] = {}
    breakdowns: dict[str, dict[str, Any]] = {}
    for env_id in args.envs:
        per_env[env_id], breakdown = _measure_env(env_id, args, hp)
        if breakdown is not None:
            breakdowns[env_id] = breakdown
    _print_tables(per_env, breakdowns, args, threads)
    payload = {
        "benchmark": "rl_throughput",
        "ratio": _worst(per_env, "ratio"),
        "ratio_sb3": _worst(per_env, "ratio_sb3"),
        "ratio_definition": "trainwise env steps/s over RLlib's (ratio) and over SB3's (ratio_sb3); "
                            "with several envs the top-level ratios are the minimum across envs",
        "bars": BARS,
        "envs": per_env,
        "breakdown": breakdowns,
        "shared_hyperparameters": asdict(hp),
        "iterations": args.iterations,
        "warmup_iterations": 1,
        "torch_threads": threads,
        "timing": "measured wall clock, sequential in one process; setup and the warm-up iteration excluded",
    }
    payload["bars_met"] = {k: (payload[k] is not None and payload[k] >= bar) for k, bar in BARS.items()}
    write_result(args.json_out, payload)
    if args.breakdown_out is not None:
        write_result(args.breakdown_out, {
            "benchmark": "rl_throughput breakdown", "envs": breakdowns,
            "ratios": {env_id: {"ratio": e["ratio"], "ratio_sb3": e["ratio_sb3"]} for env_id, e in per_env.items()},
            "env_steps_per_s": {env_id: e["env_steps_per_s"] for env_id, e in per_env.items()},
            "load": {env_id: {n: m["load"] for n, m in e["frameworks"].items()} for env_id, e in per_env.items()},
            "iterations": args.iterations, "torch_threads": threads,
        })
    return 0


if __name__ == "__main__":
    sys.exit(main())
