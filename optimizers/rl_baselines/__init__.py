"""Baseline RL tuners Seraph is compared with: the static default configuration, a grid
over shapes (and its oracle), Optuna over shapes, and a memory sweep in the style of AWS
Lambda Power Tuning. Each trains through the real trainer and ledger
(:mod:`optimizers.rl_baselines.common`) on a Seraph :class:`~optimizers.seraph.pilot.Workload`."""
