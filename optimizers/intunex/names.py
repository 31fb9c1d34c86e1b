"""The names a user picks from (CLI choices, flow parameters), kept apart from the heavy modules."""

OBJECTIVES = ("throughput-per-usd", "least-cost", "max-throughput")
BASELINES = ("static", "cachew", "intune-fixed", "greedy", "oracle")
