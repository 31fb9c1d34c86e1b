"""Where the agents come from: InTune's pre-trained node-level DQN and the cluster-level policy.

Both are stored without pickle: the DQN as ``.npz`` + ``.json`` (``optimizers/intune/pretrained``),
the cluster policy as JSON (``pretrained/cluster_policy.json``, written by
``python -m optimizers.intunex.pretrain``). A missing or unreadable cluster policy falls back to
the hand-set initial weights, which the per-plan fine-tuning then trains.
"""

from __future__ import annotations

import json
from functools import lru_cache
from pathlib import Path

from optimizers.intune.agent import MaskedDQN
from optimizers.intune.pretrain import PRETRAINED
from optimizers.intunex.cluster_agent import LinearPolicy

CLUSTER_POLICY = Path(__file__).with_name("pretrained") / "cluster_policy.json"


@lru_cache(maxsize=1)
def node_agent() -> MaskedDQN:
    """The shared node-level policy: InTune's committed pre-trained agent."""
    import torch

    torch.set_num_threads(1)
    return MaskedDQN.load(PRETRAINED)


def cluster_policy(path: Path = CLUSTER_POLICY) -> LinearPolicy:
    try:
        policy = LinearPolicy.from_json(json.loads(path.read_text()))
        policy.info = {**policy.info, "source": f"pre-trained ({path.name})"}
        return policy
    except (OSError, ValueError, KeyError):
        return LinearPolicy(info={"source": "initial weights (no pre-trained policy)"})
