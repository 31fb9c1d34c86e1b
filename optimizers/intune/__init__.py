"""InTune: an action-masked DQN that splits a node's CPUs (and sets other knobs) for an ingestion pipeline.

``make_intune_optimizer`` returns an ask/tell optimizer (``optimizers.asktell``) that starts from the
calibrated simulator's best guess and then steps through live measurements, ranking moves by the
model's predicted gain plus the agent's learnt correction of it, fine-tuning the agent online. The agent comes from, in order: a fine-tuned agent cached for this pipeline
and machine (``.trainwise/agents``), the committed pre-trained agent
(``optimizers/intune/pretrained/agent.npz`` + ``.json``), or a small one trained on the simulator
within a bounded share of the time budget.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any, Callable

from ingestion.knobs import KnobSpace
from ingestion.node import Node
from ingestion.simulator import PipelineModel, model_from_space
from optimizers.intune.agent import MaskedDQN
from optimizers.intune.env import OBS_VERSION, check_layout
from optimizers.intune.pretrain import PRETRAINED
from optimizers.intune.settings import InTuneSettings
from optimizers.intune.optimizer import InTuneOptimizer
from core.errors import UserError

__all__ = ["InTuneOptimizer", "InTuneSettings", "MaskedDQN", "make_intune_optimizer", "load_agent"]

#: Share of the time budget that training an agent from scratch may take (only if none is saved).
TRAIN_SHARE = 0.25
#: Share of the time budget that calibration may take when no profile is cached.
CALIBRATE_SHARE = 0.35


def _agent_key(space: KnobSpace, node: Node) -> str:
    from core.paths import fingerprint, hardware_fingerprint

    knobs = [(k.name, k.kind, k.stage, list(k.values)) for k in space.knobs]
    pretrained = PRETRAINED.with_suffix(".json")
    base = pretrained.read_text() if pretrained.exists() else ""  # a new pre-trained agent starts afresh
    facts = {"knobs": knobs, "node": node.__dict__, "hw": hardware_fingerprint(), "obs": OBS_VERSION, "base": base}
    return f"intune-{space.name}-{fingerprint(facts)}"


def load_agent(space: KnobSpace, node: Node, *, time_budget_s: float, seed: int = 0) -> tuple[MaskedDQN, str]:
    """The agent to use for ``space`` on ``node`` and where it came from."""
    from core.paths import cache_dir

    cached = cache_dir("agents") / _agent_key(space, node)
    for path, source in ((cached, "fine-tuned agent cached for this pipeline"), (PRETRAINED, "committed pre-trained agent")):
        if path.with_suffix(".npz").exists() and path.with_suffix(".json").exists():
            try:
                return MaskedDQN.load(path), f"{source} ({path.with_suffix('.npz')})"
            except UserError:
                continue  # an agent of an older observation version: fall through
    from optimizers.intune.suite_pretrain import pretrain_on_suite

    agent = pretrain_on_suite(40_000, seed=seed, time_limit_s=TRAIN_SHARE * time_budget_s)
    return agent, f"trained on the simulator for {agent.info.get('train_s')} s (no saved agent)"


def make_intune_optimizer(
    spec_or_space: Any,
    node: Node,
    *,
    time_budget_s: float,
    seed: int = 0,
    calibration: Any = None,
    save_agent: bool = True,
    settings: InTuneSettings | None = None,
    clock: Callable[[], float] = time.monotonic,
) -> InTuneOptimizer:
    """InTune for a ``PipelineSpec`` (calibrated on it) or a bare ``KnobSpace``.

    ``calibration`` may be a :class:`ingestion.calibrate.Calibration`, a
    :class:`ingestion.simulator.PipelineModel`, or None: then a spec is calibrated (cached per data
    and hardware), and a bare space gets an uninformed model (InTune then relies on live steps).
    ``settings``: how InTune searches (:class:`InTuneSettings`; the defaults when None).
    ``clock``: what the search's time budget is read from (tests pass a counting clock).
    """
    if time_budget_s <= 0:
        raise UserError(f"time_budget_s must be > 0 seconds, got {time_budget_s}")
    started = time.monotonic()
    space: KnobSpace = spec_or_space if isinstance(spec_or_space, KnobSpace) else getattr(spec_or_space, "space", None)
    if not isinstance(space, KnobSpace):
        raise UserError(f"InTune needs a PipelineSpec or a KnobSpace, got {type(spec_or_space).__name__}")
    check_layout(space)
    if calibration is None and not isinstance(spec_or_space, KnobSpace):
        from ingestion.calibrate import calibrate

        calibration = calibrate(spec_or_space, node, time_budget_s=CALIBRATE_SHARE * time_budget_s)
    if calibration is None:
        belief = model_from_space(space)
    elif isinstance(calibration, PipelineModel):
        belief = calibration
    else:
        belief = calibration.model
    agent, agent_source = load_agent(space, node, time_budget_s=time_budget_s, seed=seed)
    agent.info = {**agent.info, "source": agent_source}
    remaining = max(1.0, time_budget_s - (time.monotonic() - started))

    def _save(opt: InTuneOptimizer) -> None:
        if save_agent and opt.steps > 0 and opt.settings.use_agent:
            from core.paths import cache_dir

            opt.agent.info = {**opt.agent.info, "fine_tuned_live_steps": opt.agent.info.get("fine_tuned_live_steps", 0) + opt.steps}
            opt.agent.save(cache_dir("agents") / _agent_key(space, node))

    return InTuneOptimizer(space, node, belief, agent, settings or InTuneSettings(), time_budget_s=remaining,
                           clock=clock, on_finish=_save)


def pretrained_path() -> Path:
    return PRETRAINED
