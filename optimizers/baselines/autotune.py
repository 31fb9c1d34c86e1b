"""The real tf.data AUTOTUNE baseline.

Every knob tf.data can tune itself (parallelism, cycle length, prefetch depth; see
``PipelineSpec.autotune_knobs``) is set to ``tf.data.AUTOTUNE`` (-1) and the pipeline
runs with tf.data's default options (autotune on, default private thread pool, default
RAM budget). Knobs AUTOTUNE cannot set (batch size, shuffle buffer) keep the space's
defaults, as a user would write them. Nothing is searched: tf.data's runtime model
tunes the running pipeline, so this optimizer measures one configuration.
"""

from __future__ import annotations

from ingestion.knobs import Config
from ingestion.pipeline import PipelineSpec
from optimizers.baselines._fixed import FixedConfigs

AUTOTUNE = -1  # == tf.data.AUTOTUNE


def autotune_config(spec: PipelineSpec) -> Config:
    tunable = set(spec.autotune_knobs())
    return {k.name: (AUTOTUNE if k.name in tunable else k.initial) for k in spec.space.knobs}


def make_autotune_optimizer(spec: PipelineSpec) -> FixedConfigs:
    return FixedConfigs("autotune", [autotune_config(spec)])
