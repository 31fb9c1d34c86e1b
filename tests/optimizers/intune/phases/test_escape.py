"""InTune's stall escape: when single moves stop helping, it tries a configuration several moves
away that a model still consistent with its measurements predicts to be better (simulated)."""

from __future__ import annotations

from dataclasses import replace
from functools import lru_cache

import numpy as np
import pytest

from ingestion.simulator import SIM_NODES, dlrm_like_space, random_pipeline, simulate
from optimizers.asktell import run
from optimizers.intune.agent import MaskedDQN
from optimizers.intune.settings import InTuneSettings
from optimizers.intune.env import Masker, perturbed
from optimizers.intune.pretrain import PRETRAINED
from optimizers.intune.optimizer import InTuneOptimizer
from optimizers.intune.phases.escape import escape as escape_from, within_moves


def _case():
    """A read-bound pipeline on 64 vCPUs with a 10% calibration error, where the better
    configuration needs three moves (a CPU unit from transform to read, a bigger batch twice)
    whose single steps each measure worse."""
    node = SIM_NODES[64]
    rng = np.random.default_rng([0, 64, 0])
    truth = random_pipeline(rng, "read")
    return node, truth, perturbed(truth, rng, 0.10), dlrm_like_space(node)


@lru_cache(maxsize=None)  # the runs are deterministic; tests only read them
def _tune(max_escapes: int):
    node, truth, belief, space = _case()
    noise = np.random.default_rng([0, 64, 99])  # the simulated benchmark's noise stream for this case
    opt = InTuneOptimizer(space, node, belief, MaskedDQN.load(PRETRAINED),
                          InTuneSettings(max_steps=40, finetune_steps=0, max_escapes=max_escapes))
    result = run(opt, lambda c: simulate(truth, c, node, noise=0.03, rng=noise), max_trials=41)
    return opt, result, truth, node


@pytest.mark.slow
def test_the_search_reaches_the_better_configuration_several_moves_away():
    """The case was built so that single steps from the start each measure worse; the search
    (model jumps, escapes, exploration) still ends at the simulated grid's best, with or without
    escapes, and stops by itself."""
    from ingestion.simulator import simulated_oracle

    stuck, stuck_result, truth, node = _tune(max_escapes=0)
    opt, result, _, _ = _tune(max_escapes=6)
    _, oracle, _ = simulated_oracle(truth, opt.space, node)
    found_x = simulate(truth, result.best_config, node).rows_per_s
    assert found_x >= 0.98 * oracle.rows_per_s
    assert found_x >= 0.999 * simulate(truth, stuck_result.best_config, node).rows_per_s
    assert opt.finished and stuck.state.escapes == 0


@pytest.mark.slow
def test_an_escape_is_an_unmeasured_safe_configuration_within_its_depth(monkeypatch):
    """Without the re-fit (so no model jumps either) the search on this case stalls and escapes;
    every escape it takes is unmeasured, memory-safe and within ``escape_depth`` moves of the best
    measured configuration."""
    import optimizers.intune.optimizer as optimizer_module

    taken = []

    def recorded(setup, state, best):
        target = escape_from(setup, state, best)
        if target is not None:
            near = {Masker.key(c) for c in within_moves(state.masker, best, setup.settings.escape_depth)}
            taken.append((target, set(state.visited), state.masker.safe(target), near))
        return target

    monkeypatch.setattr(optimizer_module, "escape", recorded)
    node, truth, belief, space = _case()
    noise = np.random.default_rng([0, 64, 99])
    opt = InTuneOptimizer(space, node, belief, MaskedDQN.load(PRETRAINED),
                          InTuneSettings(max_steps=40, finetune_steps=0, max_escapes=6, refit=False))
    run(opt, lambda c: simulate(truth, c, node, noise=0.03, rng=noise), max_trials=41)
    assert taken and len(taken) == opt.state.escapes
    for target, measured, safe, near in taken:
        assert Masker.key(target) not in measured and safe and Masker.key(target) in near


@pytest.mark.slow
def test_escapes_are_new_safe_configurations_within_budget():
    opt, result, _, _ = _tune(max_escapes=6)
    searched = [Masker.key(h["config"]) for h in opt.history if not h.get("repeat")]
    assert len(searched) == len(set(searched))  # the search never proposes a configuration twice
    repeats = [h for h in opt.history if h.get("repeat")]
    # only the final race measures again: its entrants, once per round at most
    race = opt.report()["race"]
    assert len(repeats) <= race["entrants"] * race["rounds"] <= race["entrants"] * opt.settings.race_rounds
    assert not any(t.measurement.failed for t in result.trials)
    assert all(opt.space.is_valid(t.config) for t in result.trials)
    assert opt.state.escapes <= 6 and opt.report()["escapes"] == opt.state.escapes


def test_within_moves_reaches_exactly_the_configurations_a_few_moves_away():
    node, truth, belief, space = _case()
    opt = InTuneOptimizer(space, node, belief, MaskedDQN.load(PRETRAINED))
    one = {Masker.key(c) for c in within_moves(opt.state.masker, opt.start, 1)}
    two = {Masker.key(c) for c in within_moves(opt.state.masker, opt.start, 2)}
    direct = {Masker.key(c) for i, c in enumerate(opt.state.masker.targets(opt.start)) if c is not None} - {Masker.key(opt.start)}
    assert one == direct
    assert one < two and Masker.key(opt.start) not in two


def test_confirmation_recommends_by_the_mean_not_a_lucky_measurement():
    node = SIM_NODES[8]
    space = dlrm_like_space(node)
    truth = random_pipeline(np.random.default_rng(3), "parse")
    opt = InTuneOptimizer(space, node, truth, MaskedDQN.load(PRETRAINED), InTuneSettings(max_steps=12, finetune_steps=0))
    lucky = Masker.key(opt.start)
    measured: set[tuple] = set()

    def evaluate(config):
        m = simulate(truth, config, node)
        first = Masker.key(config) not in measured
        measured.add(Masker.key(config))
        return replace(m, rows_per_s=m.rows_per_s * 1.5) if first and Masker.key(config) == lucky else m

    run(opt, evaluate, max_trials=30)
    assert opt.state.samples[lucky][0] == pytest.approx(1.5 * opt.state.samples[lucky][1])  # it was measured again
    assert opt.state.visited[lucky].rows_per_s == pytest.approx(np.mean(opt.state.samples[lucky]))
    estimates = {k: m.rows_per_s for k, m in opt.state.visited.items()}
    assert Masker.key(opt.best[0]) == max(estimates, key=estimates.get)
