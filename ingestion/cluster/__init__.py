"""Multi-node ingestion: instance types, training jobs, the cluster model and the tf.data service runner.

* :mod:`ingestion.cluster.instances`: the versioned on-demand instance table (``data/instances.json``).
* :mod:`ingestion.cluster.jobs`: the jobs file a user writes (pydantic, one-line errors).
* :mod:`ingestion.cluster.model`: the cluster model; per-node throughput from the single-node
  simulator, composed with the tf.data service's measured overheads.
* :mod:`ingestion.cluster.service`: a real tf.data service (dispatcher + worker processes) and a
  trainer-side reader that counts delivered rows (optionally at a trainer's pace).
* :mod:`ingestion.cluster.pipelines`: the real pipelines a jobs file may name for live runs.
* :mod:`ingestion.cluster.live`: runs an assignment on nodes (local CPUs, or node agents) and
  measures each job's capacity and delivered rows/s.
* :mod:`ingestion.cluster.agent`: the node agent (JSON over HTTP) that starts a job's workers on
  an ingestion node, and its client.
"""
