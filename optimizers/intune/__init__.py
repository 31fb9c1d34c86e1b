"""InTune: an action-masked DQN that splits a node's CPUs (and sets other knobs) for an ingestion pipeline.

``make_intune_optimizer`` returns an ask/tell optimizer (``optimizers.asktell``) that starts from the
calibrated simulator's best guess and then steps through live measurements, ranking moves by the
model's predicted gain plus the agent's learnt correction of it, fine-tuning the agent online. The agent comes from, in order: a fine-tuned agent cached for this pipeline
and machine (``.trainwise/agents``), the committed pre-trained agent
(``optimizers/intune/pretrained/agent.npz`` + ``.json``), or a small one trained on the simulator
within a bounded share of the time budget.
"""

from __future__ import annotations

from typing import Any

from core.budget import Budget
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


def _agent_key(space: KnobSpace, node: Node) -> str:
    from core.paths import fingerprint, hardware_fingerprint

    knobs = [(k.name, k.kind, k.stage, list(k.values)) for k in space.knobs]
    pretrained = PRETRAINED.with_suffix(".json")
    base = pretrained.read_text() if pretrained.exists() else ""  # a new pre-trained agent starts afresh
    facts = {"knobs": knobs, "node": node.__dict__, "hw": hardware_fingerprint(), "obs": OBS_VERSION, "base": base}
    return f"intune-{space.name}-{fingerprint(facts)}"


def load_agent(space: KnobSpace, node: Node, *, budget: Budget, settings: InTuneSettings, seed: int = 0
               ) -> tuple[MaskedDQN, str]:
    """The agent to use for ``space`` on ``node`` and where it came from (training one, when none
    is saved, takes at most ``train_share`` of the budget)."""
    from core import state
    from core.paths import cache_dir

    cached = cache_dir("agents") / _agent_key(space, node)
    for suffix in (".npz", ".json"):  # fetched from S3 state when missing here (core.state)
        state.pull(cached.with_suffix(suffix))
    for path, source in ((cached, "fine-tuned agent cached for this pipeline"), (PRETRAINED, "committed pre-trained agent")):
        if path.with_suffix(".npz").exists() and path.with_suffix(".json").exists():
            try:
                return MaskedDQN.load(path), f"{source} ({path.with_suffix('.npz')})"
            except UserError:
                continue  # an agent of an older observation version: fall through
    from optimizers.intune.suite_pretrain import pretrain_on_suite

    agent = pretrain_on_suite(settings.train_steps, seed=seed, time_limit_s=budget.share(settings.train_share))
    return agent, f"trained on the simulator for {agent.info.get('train_s')} s (no saved agent)"


def make_intune_optimizer(
    spec_or_space: Any,
    node: Node,
    *,
    budget: Budget,
    seed: int = 0,
    calibration: Any = None,
    save_agent: bool = True,
    settings: InTuneSettings | None = None,
) -> InTuneOptimizer:
    """InTune for a ``PipelineSpec`` (calibrated on it) or a bare ``KnobSpace``, within ``budget``.

    ``calibration`` may be a :class:`ingestion.calibrate.Calibration`, a
    :class:`ingestion.simulator.PipelineModel`, or None: then a spec is calibrated (cached per data
    and hardware, within ``calibrate_share`` of the budget), and a bare space gets an uninformed
    model (InTune then relies on live steps). ``settings``: how InTune searches
    (:class:`InTuneSettings`; the defaults when None). The search gets what calibration and
    loading the agent left of ``budget``, read from the budget's clock.
    """
    settings = settings or InTuneSettings()
    space: KnobSpace = spec_or_space if isinstance(spec_or_space, KnobSpace) else getattr(spec_or_space, "space", None)
    if not isinstance(space, KnobSpace):
        raise UserError(f"InTune needs a PipelineSpec or a KnobSpace, got {type(spec_or_space).__name__}")
    check_layout(space)
    belief = _belief(spec_or_space, space, node, calibration, budget.share(settings.calibrate_share))
    agent, agent_source = load_agent(space, node, budget=budget, settings=settings, seed=seed)
    agent.info = {**agent.info, "source": agent_source}

    def _save(opt: InTuneOptimizer) -> None:
        if save_agent and opt.steps > 0 and opt.settings.use_agent:
            from core import state
            from core.paths import cache_dir

            opt.agent.info = {**opt.agent.info, "fine_tuned_live_steps": opt.agent.info.get("fine_tuned_live_steps", 0) + opt.steps}
            for path in opt.agent.save(cache_dir("agents") / _agent_key(space, node)):
                state.push(path)

    return InTuneOptimizer(space, node, belief, agent, settings, time_budget_s=max(1.0, budget.remaining()),
                           clock=budget.clock, on_finish=_save)


def _belief(spec_or_space: Any, space: KnobSpace, node: Node, calibration: Any, calibrate_s: float) -> PipelineModel:
    """The model InTune starts from: the calibration given, else a spec calibrated within
    ``calibrate_s`` seconds, else (a bare space) an uninformed model."""
    if calibration is None and not isinstance(spec_or_space, KnobSpace):
        from ingestion.calibrate import calibrate

        calibration = calibrate(spec_or_space, node, time_budget_s=calibrate_s)
    if calibration is None:
        return model_from_space(space)
    if isinstance(calibration, PipelineModel):
        return calibration
    return calibration.model
