"""Prefect tasks: thin wrappers over the libraries, with the orchestration concerns.

- ``rl``: profile an RL workload (cached), search a configuration, train on functions.
- ``ingest``: locate or generate data, profile the pipeline (cached), tune, measure live.
- ``report`` / ``plots``: the run report, table artifacts, PNGs.
- ``caching`` (profile cache policy), ``retry`` (transient-failure retries),
  ``progress`` (progress artifacts and the wrappers that feed them), ``branches``.

The libraries (``optimizers``, ``serverless``, ``ingestion``) never import Prefect.
"""
