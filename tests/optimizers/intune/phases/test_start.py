"""InTune's live start: near-ties between CPU splits that the model cannot rank are measured
before the local search (simulated pipelines; no timing)."""

from __future__ import annotations

from dataclasses import replace

import pytest

from ingestion.dlrm import dlrm_knob_space
from ingestion.node import Node
from ingestion.simulator import model_from_space, simulate
from optimizers.asktell import run
from optimizers.intune.agent import MaskedDQN
from optimizers.intune.settings import InTuneSettings
from optimizers.intune.env import Masker
from optimizers.intune.pretrain import PRETRAINED
from optimizers.intune.optimizer import InTuneOptimizer
from optimizers.intune.phases.start import model_best, start_candidates

NODE = Node("n2", vcpus=2, ram_gib=8)
COSTS = {"read": 1.5e-6, "shuffle": 0.2e-6, "batch": 0.1e-6, "parse": 5e-6, "transform": 5.2e-6, "prefetch": 0.1e-6}


def _model(parse_factor: float = 1.0):
    space = dlrm_knob_space(NODE)
    costs = {s: {"cpu_s_per_row": c * (parse_factor if s == "parse" else 1.0), "bytes_per_row": 200.0}
             for s, c in COSTS.items()}
    return space, model_from_space(space, costs=costs, oversub_overhead=0.0, source="test")


def _split(space, config):
    return tuple(config[k.name] for k in space.cpu_knobs)


def test_start_candidates_are_the_best_of_distinct_cpu_splits_within_the_band():
    space, belief = _model()
    masker = Masker(space, NODE, belief, 0.85)
    chosen = start_candidates(belief, space, NODE, masker)
    assert 2 <= len(chosen) <= InTuneSettings().start_splits
    assert Masker.key(chosen[0]) == Masker.key(model_best(belief, space, NODE, masker)[0])
    assert len({_split(space, c) for c in chosen}) == len(chosen)
    best = simulate(belief, chosen[0], NODE).score
    scores = [simulate(belief, c, NODE).score for c in chosen]
    assert all(x >= best * (1 - InTuneSettings().start_band) for x in scores) and scores == sorted(scores, reverse=True)
    # each is the model's best of its split
    for c in chosen:
        same = [g for g in space.grid() if _split(space, g) == _split(space, c) and masker.safe(g)]
        assert simulate(belief, c, NODE).score == pytest.approx(max(simulate(belief, g, NODE).score for g in same))
    assert start_candidates(belief, space, NODE, masker, InTuneSettings(start_band=0.0)) == chosen[:1]


def test_the_start_measures_near_ties_first_and_keeps_the_better_one():
    """The model ranks two threads on transform 11% below threads on parse (within the band); in
    truth parsing costs 40% less, so the transform split is best by 20%. The start measures it
    before any local step, and the recommendation is it."""
    space, belief = _model()
    _, truth = _model(parse_factor=0.6)
    opt = InTuneOptimizer(space, NODE, belief, MaskedDQN.load(PRETRAINED), InTuneSettings(max_steps=8, finetune_steps=0))
    assert opt.state.start_alternatives and opt.report()["start_alternatives"] == opt.state.start_alternatives
    run(opt, lambda c: simulate(truth, c, NODE), max_trials=12)
    first = [Masker.key(h["config"]) for h in opt.history[: 1 + len(opt.state.start_alternatives)]]
    assert first == [Masker.key(c) for c in [opt.start, *opt.state.start_alternatives]]
    measured = {Masker.key(h["config"]): h["rows_per_s"] for h in opt.history}
    assert opt.best[1].rows_per_s >= max(measured[k] for k in first) * 0.999
    assert _split(space, opt.best[0]) == (0, 0, 2)
    best_truth = max(simulate(truth, c, NODE).rows_per_s for c in space.grid())
    assert opt.best[1].rows_per_s == pytest.approx(best_truth, rel=1e-6)
