"""The names a user picks from (CLI choices, flow parameters), kept apart from the heavy modules."""

OBJECTIVES = ("throughput-per-usd", "least-cost", "max-throughput")
BASELINES = ("static", "cachew", "intune-fixed", "greedy", "oracle")
#: The baselines a live run measures unless the request names others (any of BASELINES runs live).
LIVE_BASELINES = ("static", "cachew")
