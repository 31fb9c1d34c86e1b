"""Every setting of the InTune optimizer in one frozen dataclass (what travels instead of keywords)."""

from __future__ import annotations

from dataclasses import dataclass, fields
from typing import Any, Mapping

from core.errors import UserError


@dataclass(frozen=True)
class InTuneSettings:
    """Every number InTune's search uses (the phases are in :mod:`optimizers.intune.phases`;
    ``docs/intune.md`` has one table of them, with why each is what it is).

    Set-up: ``calibrate_share`` of the time budget for calibrating the pipeline when no profile
    is cached, ``train_share`` of it (and at most ``train_steps`` environment steps) for training
    an agent when none is saved. Start: the model's best configuration (exhaustive on the model
    up to ``exhaustive_limit`` configurations), and the model's best of each other CPU split it
    predicts within ``start_band`` of its best, ``start_splits`` splits in all; a start whose
    candidates all failed tries the configurations within ``start_fallback_depth`` moves.
    Search: ``max_steps`` live measurements at most; ``patience`` steps without a gain of
    ``min_gain`` count as a stall (the agent's "stop" counts after ``agent_stop_share`` of
    them); ``branch`` moves tried from each measured configuration; ``model_weight`` times the
    model's predicted log gain is added to the agent's Q-value (``use_agent=False`` ranks by the
    model alone); ``finetune_steps`` gradient steps per live transition once the replay buffer
    holds ``finetune_min_replay``. Refit (``refit``): a factor on all costs, one on per-call
    costs and one per parallel stage, each within ``refit_range``, fitted to at most
    ``fit_points`` live measurements (the level only with fewer than ``level_only_below``), with
    a weak prior of weight ``refit_prior_weight``: the first fit tries ``refit_values`` in
    ``refit_passes`` passes, later ones ``refit_steps`` around the last fit. Jumps:
    ``max_jumps`` model jumps, each climbing the model for at most ``jump_rounds`` rounds through
    the best ``jump_width`` neighbours. Stall: ``max_escapes`` escapes within ``escape_depth``
    moves, plausible models stretched by ``escape_stretch`` within ``escape_slack`` squared log
    error per point. Not sure yet (``sure_error``): while the re-fitted model misses the live
    measurements by more than this RMS log error, or some unmeasured configuration may still gain
    ``min_gain``, InTune explores (the whole grid up to ``explore_grid`` configurations, else near
    the ``explore_bases`` best measured; ``explore_shortlist`` candidates scored). Failures:
    ``failure_penalty`` on a configuration one learnt failure rule matches (two: masked);
    ``memory_margin`` of the RAM budget the model's memory prediction must stay under. Time: the
    search stops when the next step would end past ``finish_share`` of the budget; the
    confirmation must end within ``confirm_share``; the next measurement is expected to take as
    long as the longest of the last ``duration_window``; once ``reserve_after`` configurations ran,
    the time the confirmation needs is kept. End: a race of the ``confirm_top`` configurations
    within ``confirm_band`` (with the best of another CPU split within ``confirm_split_band`` when
    they share one, ``None``: off; and, with ``confirm_buffers``, the leader with each buffer at
    its largest memory-safe value), measured side by side for at most ``race_rounds`` rounds; a
    finalist leaves when the leader beats it by more than ``race_band`` (``None``: off) or, from
    ``race_min_rounds`` rounds on, when the ``race_confidence`` interval of their paired ratio
    excludes a tie; the search keeps time for the race's first round and ``race_min_rounds - 1``
    more rounds of the top two, within ``race_share`` of the budget.
    """

    calibrate_share: float = 0.35
    train_share: float = 0.25
    train_steps: int = 40_000
    exhaustive_limit: int = 4000
    start_band: float = 0.15
    start_splits: int = 3
    start_fallback_depth: int = 2
    finish_share: float = 0.9
    confirm_share: float = 0.97
    duration_window: int = 7
    reserve_after: int = 3
    max_steps: int = 60
    patience: int = 10
    agent_stop_share: float = 0.5
    branch: int = 3
    model_weight: float = 1.0
    use_agent: bool = True
    refit: bool = True
    fit_points: int = 12
    level_only_below: int = 3
    refit_range: tuple[float, float] = (0.25, 4.0)
    refit_prior_weight: float = 0.02
    refit_passes: int = 2
    refit_values: tuple[float, ...] = (0.5, 0.65, 0.8, 0.9, 1.0, 1.1, 1.25, 1.5, 2.0)
    refit_steps: tuple[float, ...] = (0.8, 0.9, 1.1, 1.25)
    max_jumps: int = 8
    jump_width: int = 8
    jump_rounds: int = 12
    min_gain: float = 0.01
    max_escapes: int = 6
    escape_depth: int = 3
    escape_slack: float = 0.02 ** 2
    escape_stretch: tuple[float, ...] = (0.1, 0.2, 0.3, 0.4)
    sure_error: float = 0.05
    explore_grid: int = 2000
    explore_bases: int = 3
    explore_shortlist: int = 48
    failure_penalty: float = 0.5
    confirm_top: int = 3
    confirm_band: float = 0.10
    confirm_split_band: float | None = 0.25
    confirm_buffers: bool = True
    race_rounds: int = 5
    race_min_rounds: int = 3
    race_band: float | None = 0.2
    race_confidence: float = 0.9
    race_share: float = 0.35
    finetune_steps: int = 4
    finetune_min_replay: int = 8
    memory_margin: float = 0.85

    def __post_init__(self) -> None:
        for name in ("finish_share", "confirm_share", "memory_margin", "failure_penalty", "calibrate_share",
                     "train_share", "agent_stop_share", "race_confidence", "race_share"):
            value = getattr(self, name)
            if not 0 < value <= 1:
                raise UserError(f"InTune setting {name} must be in (0, 1], got {value}")
        for name in ("confirm_split_band", "race_band"):
            value = getattr(self, name)
            if value is not None and not 0 < value < 1:
                raise UserError(f"InTune setting {name} must be in (0, 1) or None (off), got {value}")
        for name in ("max_steps", "patience", "branch", "race_rounds", "race_min_rounds", "start_splits", "fit_points",
                     "duration_window", "refit_passes"):
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
