"""InTune on pipelines it has not seen (simulated suite members, no timing): it keeps searching
after a configuration fails, learns which configurations fail, uses its budget while the model
misses the measurements, and never recommends a configuration that measured clearly slower than
its best one."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest

from core.errors import UserError
from ingestion.measurement import Measurement
from ingestion.pipelines import member, suite_node
from optimizers.asktell import run
from optimizers.intune.agent import DQNConfig, MaskedDQN
from optimizers.intune.env import Masker, calibration_like, randomised
from optimizers.intune.failures import FailureRules, Rule
from optimizers.intune.settings import InTuneSettings
from optimizers.intune.optimizer import InTuneOptimizer
from optimizers.intune.phases.escape import within_moves

MODEL_ONLY = InTuneSettings(use_agent=False, finetune_steps=0)


def _case(name: str, vcpus: int, seed: int = 0, error: float = 0.25):
    m = member(name)
    node = suite_node(vcpus)
    space = m.space(node)
    rng = np.random.default_rng(seed)
    truth = randomised(m.model(space), rng, 0.3)
    return m, node, space, truth, calibration_like(truth, rng, error)


def _tune(m, node, space, truth, belief, *, settings=MODEL_ONLY, start=None, budget_s=180.0, trial_s=4.5, noise=0.0):
    t = [0.0]
    rng = np.random.default_rng(1)

    def evaluate(config):
        t[0] += trial_s
        return m.simulate(truth, config, node, noise=noise, rng=rng)

    opt = InTuneOptimizer(space, node, belief, MaskedDQN(DQNConfig(), seed=0), settings, start=start,
                          time_budget_s=budget_s, clock=lambda: t[0])
    return opt, run(opt, evaluate, time_budget_s=budget_s, clock=lambda: t[0])


def _oracle(m, node, space, truth) -> float:
    return max(m.simulate(truth, c, node).score for c in space.grid())


def test_a_rejected_start_is_not_a_reason_to_stop():
    m, node, space, truth, belief = _case("clicks-csv", 2)
    rejected = {**space.initial(), "cycle": 1, "read": 2}
    assert m.rejects(rejected)
    opt, result = _tune(m, node, space, truth, belief, start=rejected)
    assert result.trials[0].measurement.failed
    assert len(result.trials) >= 10 and opt.state.current is not None
    best, measured = opt.best
    assert not m.rejects(best) and not measured.failed
    assert m.simulate(truth, best, node).rows_per_s >= 0.9 * _oracle(m, node, space, truth)


@pytest.mark.slow
def test_it_learns_which_configurations_fail_and_stops_trying_them():
    m, node, space, truth, belief = _case("clicks-csv", 8)
    invalid = sum(1 for c in space.grid() if m.rejects(c))
    assert invalid >= 20  # a quarter of the space is rejected by tf.data
    opt, result = _tune(m, node, space, truth, belief, budget_s=300)
    failed = [t.config for t in result.trials if t.measurement.failed]
    assert len(failed) <= 4 and len(result.trials) >= 3 * len(failed)
    assert len(failed) <= 1 or any(r.startswith("read > cycle") for r in opt.report()["failure_rules"])
    assert not m.rejects(opt.best[0]) and not opt.best[1].failed


def test_failure_rules_generalise_and_running_configurations_refute_them():
    space = member("clicks-csv").space(suite_node(8))
    rules = FailureRules(space)
    base = space.initial()
    rules.add({**base, "cycle": 1, "read": 2}, failed=True)
    rules.add({**base, "cycle": 2, "read": 4, "parse": 1}, failed=True)
    rules.add({**base, "cycle": 4, "read": 4, "parse": 2}, failed=False)
    found = rules.rules()
    assert found[Rule("above", "read", "cycle")] == 2
    assert Rule("at_least", "read", value=4) not in found  # a configuration with read 4 ran
    assert rules.predicted({**base, "cycle": 2, "read": 8}) == 2
    assert rules.predicted({**base, "cycle": 4, "read": 2, "parse": 2}) == 0


def test_memory_failures_scale_the_memory_model_instead_of_forming_rules():
    m, node, space, truth, belief = _case("shuffle-heavy", 2)
    opt, result = _tune(m, node, space, truth, belief)
    assert not opt.state.failures.failed  # memory limits are no rule
    big = {**opt.best[0], "shuffle_buffer": max(space.knob("shuffle_buffer").values)}
    assert not opt.state.masker.safe(big)
    assert not opt.best[1].failed


def test_a_memory_failure_masks_what_holds_as_much_when_the_model_cannot_size_memory():
    m, node, space, truth, belief = _case("shuffle-heavy", 2)
    # a calibration that could not size the elements: the model's memory is its base alone
    blind = replace(belief, stages=tuple(replace(st, bytes_per_row=0.0) for st in belief.stages))
    start = {**space.initial(), "shuffle_buffer": max(space.knob("shuffle_buffer").values)}
    assert m.simulate(truth, start, node).failed
    opt, result = _tune(m, node, space, truth, blind, start=start)
    assert result.trials[0].measurement.failed  # the start fails; the search goes on
    assert len(result.trials) >= 10 and not opt.best[1].failed
    assert opt.state.masker.safe(space.initial())
    larger = {k: max(v, space.knob(k).values[-1] if k == "prefetch" else v) for k, v in start.items()}
    assert not opt.state.masker.safe(larger)
    later = [t.config for t in result.trials[1:]]
    assert not any(all(c[k] >= v for k, v in start.items()) for c in later)


def test_a_short_budget_after_a_failed_start_is_searched_not_kept_for_a_confirmation():
    """60 s, the start runs out of memory, and the next measurement pays the measuring process's
    restart (10 s against 4.2 s): the time kept for the end is what the confirmation needs now,
    and the restart is not taken for how long every measurement lasts."""
    m, node, space, truth, belief = _case("shuffle-heavy", 2)
    blind = replace(belief, stages=tuple(replace(st, bytes_per_row=0.0) for st in belief.stages))
    start = {**space.initial(), "shuffle_buffer": max(space.knob("shuffle_buffer").values)}
    t, last_failed = [0.0], [False]

    def evaluate(config):
        t[0] += 7.0 if config == start else (10.0 if last_failed[0] else 4.2)
        out = m.simulate(truth, config, node)
        last_failed[0] = out.failed
        return out

    opt = InTuneOptimizer(space, node, blind, MaskedDQN(DQNConfig(), seed=0), MODEL_ONLY, start=start,
                          time_budget_s=60.0, clock=lambda: t[0])
    result = run(opt, evaluate, time_budget_s=60.0, clock=lambda: t[0])
    assert result.trials[0].measurement.failed
    # the budget is used (search, then the confirmation of what is near-tied) and kept
    assert 0.8 * 60.0 <= result.trials[-1].elapsed_s <= 60.0
    assert len([h for h in opt.history if not h.get("repeat")]) >= 5


@pytest.mark.slow
def test_it_uses_its_budget_while_the_model_misses_and_stops_early_when_sure():
    m, node, space, truth, belief = _case("text-hash", 8, error=0.5)
    unsure, result = _tune(m, node, space, truth, belief, noise=0.05)
    assert result.tuning_s >= 0.8 * 180 or len(result.trials) >= space.grid_size() * 0.5
    sure, exact = _tune(m, node, space, truth, truth, noise=0.0)
    assert len(exact.trials) < len(result.trials) and exact.tuning_s < 0.8 * 180
    assert sure.finished and sure.state.explorations < unsure.state.explorations


def test_a_paired_win_never_goes_to_a_configuration_clearly_slower_than_the_best():
    m, node, space, truth, belief = _case("dlrm-tsv", 2)
    opt = InTuneOptimizer(space, node, belief, MaskedDQN(DQNConfig(), seed=0), MODEL_ONLY)
    a, b = within_moves(opt.state.masker, opt.start, 1)[:2]
    opt.state.start_queue = []

    def m_(x):
        return Measurement(rows_per_s=x, peak_rss_mb=500.0, label="measured")

    opt.tell(opt.ask(), m_(100.0))
    opt.tell(a, m_(200.0))
    opt.tell(b, m_(185.0))
    assert opt.confirm_or_finish("scripted") == a
    opt.tell(a, m_(150.0))
    assert opt.ask() == b
    opt.tell(b, m_(170.0))  # measured back to back, b beats a
    best, measured = opt.best
    assert best == b and measured.rows_per_s == 177.5
    assert measured.rows_per_s >= (1 - opt.settings.confirm_band) * max(v.rows_per_s for v in opt.state.visited.values())


@pytest.mark.slow
@pytest.mark.parametrize("seed", [0, 1, 2])
def test_recommendation_is_never_a_failed_or_clearly_worse_configuration(seed):
    m, node, space, truth, belief = _case("shuffle-heavy", 2, seed=seed)
    opt, result = _tune(m, node, space, truth, belief, noise=0.08)
    best, measured = opt.best
    assert not measured.failed and Masker.key(best) not in opt.state.masker.forbidden
    means = [v.rows_per_s for v in opt.state.visited.values() if not v.failed]
    assert measured.rows_per_s >= (1 - opt.settings.confirm_band) * max(means)


def test_settings_are_validated_with_a_one_line_error():
    with pytest.raises(UserError, match="finish_share"):
        InTuneSettings(finish_share=1.5)
    with pytest.raises(UserError, match="unknown InTune setting"):
        InTuneSettings.from_mapping({"max_stpes": 3})
    assert InTuneSettings.from_mapping({"max_steps": 3}).max_steps == 3


@pytest.mark.slow
def test_a_stall_late_in_the_budget_leaves_time_for_the_confirmation():
    m, node, space, truth, belief = _case("text-hash", 8, error=0.5)
    opt, result = _tune(m, node, space, truth, belief, noise=0.05)
    assert opt.finished and opt.finished.startswith("time budget")
    assert any(h.get("repeat") for h in opt.history)  # the best candidates were measured again
    assert result.tuning_s <= 180 + 4.5
