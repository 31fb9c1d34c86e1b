"""Naive baseline: the pipeline as first written, with no parallelism.

Every ``cpu`` knob at its smallest value (for the DLRM pipeline 0 = sequential, what
tf.data does without ``num_parallel_calls``; "parallelism 1" in the issue's words),
every other knob at its default.
"""

from __future__ import annotations

from ingestion.knobs import Config, KnobSpace
from optimizers.baselines._fixed import FixedConfigs


def naive_config(space: KnobSpace) -> Config:
    config = {k.name: k.initial for k in space.knobs}
    config.update({k.name: k.values[0] for k in space.cpu_knobs})
    return config


def make_naive_optimizer(space: KnobSpace) -> FixedConfigs:
    return FixedConfigs("naive", [naive_config(space)])
