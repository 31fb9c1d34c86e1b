"""Every setting of the InTune tuner in one frozen dataclass (what travels instead of keywords)."""

from __future__ import annotations

from dataclasses import dataclass, fields
from typing import Any, Mapping

from core.errors import UserError


@dataclass(frozen=True)
class InTuneSettings:
    """How InTune searches, stops and confirms (see :mod:`optimizers.intune.tuner`).

    Search: ``max_steps`` live measurements at most; ``patience`` steps without a gain of
    ``min_gain`` count as a stall; ``branch`` moves tried from each measured configuration;
    ``model_weight`` times the model's predicted log gain is added to the agent's Q-value
    (``use_agent=False`` ranks by the model alone: the ablation's model-only variant); ``refit``
    re-fits the model to the live measurements; ``max_jumps`` model jumps of ``jump_width``.
    Stall: ``max_escapes`` escapes within ``escape_depth`` moves, plausible models within
    ``escape_slack`` squared log error per point. Not sure yet (``sure_error``): while the
    re-fitted model misses the live measurements by more than this RMS log error, or some
    unmeasured configuration may still gain ``min_gain`` under a plausible model, InTune keeps
    exploring instead of stopping, until ``finish_share`` of its time budget. Failures:
    ``failure_penalty`` (a factor on the predicted throughput of a configuration that a learnt
    failure rule matches once; matched by two failures, it is masked). End: ``confirm_top``
    configurations within ``confirm_band`` measured again, a near-tie within ``settle_band``
    settled by up to ``settle_rounds`` more paired measurements of the top two, while they fit
    in the budget (a noisy pipeline's near-tie is where a pick goes wrong). When those
    configurations all share one CPU split, the best measured configuration of another split is
    confirmed with them if it measured within ``confirm_split_band`` of the best (``None``: off):
    the split is the decision that moves throughput most, and one noisy search measurement must
    not settle it. ``finetune_steps`` gradient steps per live transition; ``memory_margin`` of the RAM
    budget the model's memory prediction must stay under.
    """

    finish_share: float = 0.9
    max_steps: int = 60
    patience: int = 10
    branch: int = 3
    model_weight: float = 1.0
    use_agent: bool = True
    refit: bool = True
    max_jumps: int = 8
    jump_width: int = 8
    min_gain: float = 0.01
    max_escapes: int = 6
    escape_depth: int = 3
    escape_slack: float = 0.02 ** 2
    sure_error: float = 0.05
    failure_penalty: float = 0.5
    confirm_top: int = 3
    confirm_band: float = 0.10
    confirm_split_band: float | None = 0.25
    settle_band: float | None = 0.10
    settle_rounds: int = 3
    finetune_steps: int = 4
    memory_margin: float = 0.85

    def __post_init__(self) -> None:
        for name in ("finish_share", "memory_margin", "failure_penalty"):
            value = getattr(self, name)
            if not 0 < value <= 1:
                raise UserError(f"InTune setting {name} must be in (0, 1], got {value}")
        for name in ("confirm_split_band", "settle_band"):
            value = getattr(self, name)
            if value is not None and not 0 < value < 1:
                raise UserError(f"InTune setting {name} must be in (0, 1) or None (off), got {value}")
        for name in ("max_steps", "patience", "branch", "settle_rounds"):
            if getattr(self, name) < 1:
                raise UserError(f"InTune setting {name} must be at least 1, got {getattr(self, name)}")

    @classmethod
    def from_mapping(cls, values: Mapping[str, Any]) -> "InTuneSettings":
        """Settings from a dict (a spec file, JSON); an unknown name is a one-line error."""
        allowed = {f.name for f in fields(cls)}
        unknown = sorted(set(values) - allowed)
        if unknown:
            raise UserError(f"unknown InTune setting(s) {unknown}; allowed: {', '.join(sorted(allowed))}")
        return cls(**dict(values))
