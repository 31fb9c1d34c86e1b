"""`trainwise rl`: serverless PPO training (`rl train`) and the Seraph tuner (`rl tune`)."""

from __future__ import annotations

import argparse
import sys
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from core.errors import UserError
from core.json_edge import JsonObject
from serverless.backends import BACKENDS
from trainwise.cli import add_backend_options, add_env_args, backend_options_of, finite_float

if TYPE_CHECKING:  # pragma: no cover
    from serverless.trainer import TrainResult


def add_backend_args(p: argparse.ArgumentParser) -> None:
    """``--backend`` (choices from the backend registry) and each backend's own options."""
    names = BACKENDS.names()
    p.add_argument("--backend", choices=names, default="local",
                   help="where rollouts run: " + "; ".join(f"{n}: {BACKENDS.get(n).description}" for n in names))
    add_backend_options(p, names)


def add_architecture_arg(p: argparse.ArgumentParser) -> None:
    from serverless.architectures import ARCHITECTURES, DEFAULT_ARCHITECTURE

    p.add_argument("--architecture", choices=ARCHITECTURES.names(), default=DEFAULT_ARCHITECTURE,
                   help="Lambda architecture priced: " + ", ".join(f"{a.name} ({a.description})"
                                                                  for a in ARCHITECTURES.entries()))


def add_network_args(p: argparse.ArgumentParser) -> None:
    """``--hidden`` and ``--activation``: the policy network (serverless.network.NetworkSpec).
    The activations are not listed here: building the parser loads no numpy (a wrong name is a
    one-line error naming the allowed ones, from serverless.network, when the command runs)."""
    p.add_argument("--hidden", default=None, help="the actor's and critic's hidden widths, comma-separated (default 64,64)")
    p.add_argument("--activation", default=None,
                   help="the hidden layers' activation (default tanh); one the numpy update engine does not "
                        "compute runs on torch, with a note (docs/rl.md, 'The network and the update engines')")


def register(sub: argparse._SubParsersAction) -> None:
    from trainwise.cli import add_inject_faults, add_json_out

    rl = sub.add_parser("rl", help="serverless reinforcement learning: train, tune")
    rl_subparsers = rl.add_subparsers(dest="rl_command", metavar="RL_COMMAND")
    rl_subparsers.required = True

    p = rl_subparsers.add_parser(
        "train",
        help="train PPO with rollouts in serverless functions (local emulator, Ray or AWS Lambda)",
        description="Actor-learner PPO: the actors are serverless functions. Stops when the mean return of the "
        "last 20 completed training episodes reaches --target-reward, or after --max-steps env steps.",
    )
    add_env_args(p)
    p.add_argument("--target-reward", type=finite_float, required=True, help="stop when the recent mean return reaches this")
    p.add_argument("--max-steps", type=int, default=None, help="env-step budget (default: the env's preset)")
    p.add_argument("--actors", type=int, default=None, help="concurrent rollout functions (default 4)")
    p.add_argument("--memory-mb", type=int, default=None, help="function memory, 128-10240 MB (default 1769 = 1 vCPU)")
    p.add_argument("--batch", type=int, default=None, help="env steps per iteration, split over actors (default: preset)")
    add_network_args(p)
    p.add_argument("--steps-per-env", type=int, default=0,
                   help="split each batch into envs of about N steps, whatever the actor count (default 0: one env per actor)")
    add_backend_args(p)
    p.add_argument("--seed", type=int, default=0)
    add_architecture_arg(p)
    p.add_argument("--checkpoint-dir", type=Path, default=None,
                   help="default: a new folder per run under .trainwise/checkpoints/<env>-seed<S>/")
    p.add_argument("--checkpoint-every", type=int, default=10, help="iterations between checkpoints (0 = never)")
    p.add_argument("--resume", action="store_true",
                   help="continue from the checkpoint in --checkpoint-dir (default: the newest of this env and seed "
                        "with the same settings); a checkpoint of other settings is refused, naming what differs")
    p.add_argument("--no-progress", action="store_true", help="no progress bar")
    add_inject_faults(p)
    add_json_out(p)
    p.set_defaults(handler=run_train)

    from trainwise.cli import rl_sweep, rl_tune

    rl_tune.register(rl_subparsers)
    rl_sweep.register(rl_subparsers)


def build_train_spec(args: argparse.Namespace) -> Any:
    """CLI flags -> TrainSpec (env preset, overridden by flags), fully validated."""
    from serverless.presets import preset_for
    from serverless.trainer import TrainSpec
    from trainwise.cli import parse_inject_faults

    from serverless.envs import parse_env_kwargs

    preset = preset_for(args.env)
    backend_options = backend_options_of(args)
    spec = TrainSpec(
        env_id=args.env,
        env_kwargs=parse_env_kwargs(args.env_kwargs),
        target_reward=args.target_reward,
        max_steps=preset.max_steps if args.max_steps is None else args.max_steps,
        run=replace(preset.run, **{k: v for k, v in (("actors", args.actors), ("memory_mb", args.memory_mb),
                                                       ("batch", args.batch)) if v is not None}),
        ppo=replace(preset.ppo, steps_per_env=args.steps_per_env,
                    network=preset.ppo.network.with_text(args.hidden, args.activation)),
        seed=args.seed,
        backend=args.backend,
        backend_options=backend_options,
        architecture=args.architecture,
        checkpoint_every=args.checkpoint_every,
        checkpoint_dir=args.checkpoint_dir,
        resume=args.resume,
        faults=parse_inject_faults(args),
    )
    spec.validate()
    return spec


def _clock_name(res: TrainResult) -> str:
    """The second clock named for what it measured (Ray rollouts are not Lambda)."""
    return BACKENDS.get(res.config["backend"]).clock_name


def _summary(res: TrainResult) -> str:
    ledger, prices = res.ledger, res.ledger.prices
    lines = [
        f"reached target: {res.reached} ({res.stop_reason}); env steps {res.env_steps}; "
        f"final mean return {res.final_mean_return}",
        f"wall time (measured):            {res.wall_s:.1f} s",
        f"{_clock_name(res)} ({res.lambda_time_label}): {res.lambda_time_s:.1f} s",
        f"cost ({ledger.label}, prices {prices.version}):",
    ]
    for line in ledger.lines():
        lines.append(f"  {line['component']:<14} {line['quantity']:>12.4f} {line['unit']:<20} ${line['usd']:.6f}")
    lines.append(f"  {'total':<14} {'':>12} {'':<20} ${ledger.total_usd:.6f}")
    lines += _fault_lines(res)
    lines += [f"warning: prices: {w}" for w in prices.warnings]
    lines += [f"note: {n}" for n in res.notes]
    return "\n".join(lines)


def _fault_lines(res: TrainResult) -> list[str]:
    """Faults met and what they cost, when there were any."""
    f = res.faults
    if not f or not (f.get("injected") or any(f.get("observed", {}).values())):
        return []
    def kinds(d: dict[str, int] | None) -> str:
        return ", ".join(f"{k} {v}" for k, v in (d or {}).items() if v) or "none"
    faults = res.ledger.faults()
    return [
        f"faults injected: {kinds(f.get('injected'))}; observed: {kinds(f['observed'])}; recovered: {kinds(f['recovered'])}",
        f"  retries {f['retries']}, hedges {f['hedges']} (won {f['hedge_wins']}); lost rollouts "
        f"{res.lost_rollouts}, duplicate rollouts {res.duplicate_rollouts}",
        f"  cost of faults ({res.ledger.label}): ${faults['usd']:.6f} ({100 * faults['share_of_total']:.1f}% of the total)",
    ]


def run_train(args: argparse.Namespace) -> JsonObject:
    # cheap checks first, so bad input fails before gymnasium or torch load
    from serverless.invocation import check_memory_mb

    if args.memory_mb is not None:
        check_memory_mb(args.memory_mb)
    if args.actors is not None and args.actors < 1:
        raise UserError(f"--actors must be >= 1, got {args.actors}")
    if args.max_steps is not None and args.max_steps < 1:
        raise UserError(f"--max-steps must be >= 1, got {args.max_steps}")
    if args.steps_per_env < 0:
        raise UserError(f"--steps-per-env must be >= 0 (0 = one env per actor), got {args.steps_per_env}")
    if args.checkpoint_every < 0:
        raise UserError(f"--checkpoint-every must be >= 0, got {args.checkpoint_every}")
    if not 0 <= args.seed < 2**32:
        raise UserError(f"--seed must be between 0 and 2**32 - 1, got {args.seed}")
    from trainwise.cli import parse_inject_faults

    parse_inject_faults(args)
    from serverless.network import NetworkSpec

    NetworkSpec().with_text(args.hidden, args.activation)  # a bad --hidden or --activation: one line, before any work
    from serverless.envs import inspect_env, parse_env_kwargs

    inspect_env(args.env, env_kwargs=parse_env_kwargs(args.env_kwargs))  # unknown id / unsupported space: a clear error now
    spec = build_train_spec(args)
    from optimizers.seraph.learning import record_training
    from serverless.trainer import train

    res = train(spec, progress=not args.no_progress)
    record_training(spec, res, source="rl train")
    print(_summary(res), file=sys.stdout)
    return res.to_dict()
