"""InTuneX: multi-agent planning of a multi-node ingestion pool (cluster-level node assignment,
node-level CPU split), its baselines and its planning run. See ``docs/intunex.md``."""
