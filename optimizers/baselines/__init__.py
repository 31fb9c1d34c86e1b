"""Baseline ingestion optimizers: tf.data's AUTOTUNE, a Plumber-style LP, hill climbing,
grid, Optuna, and the naive and heuristic configurations.

Every one speaks the ask/tell protocol of :mod:`optimizers.asktell` and works on any
:class:`~ingestion.pipeline.PipelineSpec`. They are built by name through the registry
in :mod:`optimizers.ingestion_optimizers`, which also holds InTune.
"""
