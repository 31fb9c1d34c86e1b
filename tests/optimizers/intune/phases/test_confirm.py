"""InTune's end game on measurements taken at different times: the finalists race side by side in
rounds of alternating order, a finalist leaves when the leader is clearly better or the paired
interval excludes a tie, a tie that stays goes to the better median, buffers race at the largest
value memory allows, and the model's level follows the live measurements from the first one
(scripted measurements, no timing)."""

from __future__ import annotations

from functools import partial

import numpy as np
import pytest

from ingestion.simulator import SIM_NODES, dlrm_like_space, random_pipeline, simulate
from ingestion.measurement import Measurement
from optimizers.intune.agent import MaskedDQN
from optimizers.intune.settings import InTuneSettings
from optimizers.intune.env import Masker
from optimizers.intune.pretrain import PRETRAINED
from optimizers.intune.optimizer import InTuneOptimizer
from optimizers.intune.phases.confirm import buffer_variants
from optimizers.intune.phases.escape import within_moves
from optimizers.intune.phases.start import cpu_split


def _opt(**kw) -> InTuneOptimizer:
    node = SIM_NODES[8]
    truth = random_pipeline(np.random.default_rng(3), "parse")
    return InTuneOptimizer(dlrm_like_space(node), node, truth, MaskedDQN.load(PRETRAINED),
                           InTuneSettings(finetune_steps=0, **kw))


def _m(x: float) -> Measurement:
    return Measurement(rows_per_s=x, peak_rss_mb=100.0, label="measured")


def _searched(opt: InTuneOptimizer, a_x: float, b_x: float) -> tuple[dict, dict]:
    """The start measured at 100, two of its neighbours a and b at ``a_x`` and ``b_x``, then the
    confirmation started (it proposes a first)."""
    opt.state.start_queue = []  # script the measurements ourselves
    opt.tell(opt.ask(), _m(100.0))
    a, b = within_moves(opt.state.masker, opt.start, 1)[:2]
    opt.tell(a, _m(a_x))
    opt.tell(b, _m(b_x))
    assert opt.confirm_or_finish("scripted") == a  # confirmation: best by search first
    return a, b


def _race(opt: InTuneOptimizer, rounds: dict[tuple, list[float]]) -> list[tuple]:
    """Answer every ask of the race from ``rounds`` (each configuration's next measurement), until
    it ends; the order of what it asked for."""
    asked, i = [], {k: 0 for k in rounds}
    config = opt.ask()
    while config is not None:
        key = Masker.key(config)
        asked.append(key)
        opt.tell(config, _m(rounds[key][i[key]]))
        i[key] += 1
        config = opt.ask()
    return asked


def test_the_race_decides_by_paired_rounds_in_alternating_order_until_the_interval_excludes_a_tie():
    opt = _opt(confirm_band=0.3, confirm_buffers=False)  # both race despite a's lucky search measurement
    a, b = _searched(opt, 160.0, 125.0)  # a: a lucky search measurement, minutes before the end
    A, B = Masker.key(a), Masker.key(b)
    opt.tell(a, _m(110.0))  # the first round's first measurement (a was proposed)
    asked = _race(opt, {A: [112.0, 111.0], B: [120.0, 118.0, 119.0]})
    assert asked == [B, B, A, A, B]  # round 1 ends with b; round 2 reversed (b, a); round 3 (a, b)
    assert opt.finished == "scripted" and opt.state.paired == {A: [110.0, 112.0, 111.0], B: [120.0, 118.0, 119.0]}
    # by the mean of all its measurements a would win; by the paired rounds b does, and after three
    # rounds the interval of b over a excludes a tie, so a leaves and the race ends
    assert opt.state.visited[A].rows_per_s > opt.state.visited[B].rows_per_s
    assert opt.best[0] == b
    race = opt.report()["race"]
    assert race["rounds"] == 3 and race["decided_by"] == "the others left the race"
    assert [(e["config"], e["after_round"], e["by"]) for e in race["eliminated"]] == [(a, 3, "interval")]
    assert race["eliminated"][0]["low"] > 1.0


def test_a_tie_that_stays_a_tie_races_to_its_last_round_and_goes_to_the_better_median():
    opt = _opt(confirm_band=0.3, confirm_buffers=False, race_rounds=4)
    a, b = _searched(opt, 160.0, 125.0)
    A, B = Masker.key(a), Masker.key(b)
    opt.tell(a, _m(110.0))
    asked = _race(opt, {A: [112.0, 109.0, 113.0], B: [112.0, 110.0, 113.0, 111.0]})
    assert asked == [B, B, A, A, B, B, A]  # four rounds, each in the order opposite to the one before
    assert opt.finished == "scripted" and not opt.report()["race"]["eliminated"]
    assert opt.best[0] == b  # medians 111.5 (b) against 111.0 (a)
    assert opt.report()["race"]["decided_by"] == "median of the rounds"


def test_a_finalist_clearly_behind_leaves_after_one_round():
    opt = _opt(confirm_buffers=False)
    a, b = _searched(opt, 130.0, 125.0)
    opt.tell(a, _m(140.0))
    assert opt.ask() == b
    opt.tell(b, _m(105.0))  # a over b 1.33x: more than race_band (a 20% gap) in one round
    assert opt.ask() is None
    assert opt.best[0] == a and opt.report()["race"]["eliminated"][0]["by"] == "band"


def test_one_round_only_when_the_race_is_limited_to_one():
    opt = _opt(confirm_buffers=False, race_rounds=1)
    a, b = _searched(opt, 130.0, 125.0)
    opt.tell(a, _m(120.0))
    assert opt.ask() == b
    opt.tell(b, _m(121.0))
    assert opt.ask() is None and opt.best[0] == b


def _small_buffers_lead(opt: InTuneOptimizer, start_x: float, b_x: float = 125.0) -> tuple[dict, dict]:
    """The start measured at ``start_x``, then the start with every buffer knob at its smallest
    value (the leader, a) at 160 and one of its neighbours (b) at ``b_x``; the race started."""
    opt.state.start_queue = []
    opt.tell(opt.ask(), _m(start_x))
    a = {**opt.start, **{k.name: min(k.values) for k in opt.space.knobs if k.kind == "buffer"}}
    b = next(c for c in within_moves(opt.state.masker, a, 1) if Masker.key(c) != Masker.key(opt.start))
    opt.tell(a, _m(160.0))
    opt.tell(b, _m(b_x))
    assert opt.confirm_or_finish("scripted") == a
    return a, b


@pytest.mark.parametrize("start_x, races", [(145.0, True), (140.0, False)])
def test_the_leader_races_with_its_buffers_at_the_largest_value_memory_allows(start_x, races):
    opt = _opt(confirm_top=2, confirm_split_band=None)  # the top two: a and b
    (knob,) = [k for k in opt.space.knobs if k.kind == "buffer"]
    a, b = _small_buffers_lead(opt, start_x, b_x=150.0)
    allowed = [v for v in knob.values if opt.state.masker.memory_safe({**a, knob.name: v})]
    variant = {**a, knob.name: max(allowed)}
    assert max(allowed) > min(knob.values) and variant == {**opt.start}  # here the start is that variant
    queue = [Masker.key(c) for c in opt.state.confirm_queue]
    # it races as the leader's buffer variant, unless the search measured it more than
    # confirm_band (no split band here) below the leader
    assert queue == ([Masker.key(b), Masker.key(variant)] if races else [Masker.key(b)])
    if races:  # measured side by side, the larger buffer wins when it runs faster
        opt.tell(a, _m(150.0))
        _race(opt, {Masker.key(a): [150.0] * 4, Masker.key(b): [140.0] * 5, Masker.key(variant): [175.0] * 5})
        assert opt.best[0] == variant and opt.report()["race"]["entrants"] == 3


def test_when_memory_binds_a_buffer_the_result_says_so():
    opt = _opt(confirm_band=0.3)
    a, b = _small_buffers_lead(opt, 150.0)
    opt.state.masker.memory_scale = 1e6  # every larger buffer would pass the memory budget
    variants, bound = buffer_variants(opt.setup, opt.state, a, 160.0)
    buffers = [k for k in opt.space.knobs if k.kind == "buffer"]
    assert variants == [] and bound == {k.name: min(k.values) for k in buffers}
    opt.state.confirm_queue = []  # the race's first round: a and b only
    opt.tell(a, _m(150.0))
    opt.tell(b, _m(110.0))
    assert opt.ask() is None and opt.best[0] == a
    assert opt.report()["race"]["buffers_memory_bound"] == bound


def test_the_model_level_follows_the_first_live_measurement():
    opt = _opt()
    start = opt.ask()
    modelled = simulate(opt.prior, start, opt.node).rows_per_s
    opt.tell(start, _m(1.7 * modelled))  # the machine runs 1.7x faster than the calibration said
    assert simulate(opt.state.belief, start, opt.node).rows_per_s == pytest.approx(1.7 * modelled, rel=0.03)
    assert opt.state.refit_factors[1:] == [1.0] * (len(opt.state.refit_factors) - 1)  # the level only


def _split_searched(opt: InTuneOptimizer, b_x: float, c_x: float) -> tuple[dict, dict, dict]:
    """The start measured at 80, then two configurations of one CPU split (a at 130, b at ``b_x``)
    and one of another split (c at ``c_x``), none the start; then the confirmation started (it
    proposes a first)."""
    opt.state.start_queue = []
    opt.tell(opt.ask(), _m(80.0))
    split = partial(cpu_split, opt.space)
    near = [c for c in within_moves(opt.state.masker, opt.start, 2) if split(c) != split(opt.start)]
    a = near[0]
    b = next(c for c in near[1:] if split(c) == split(a))
    c = next(c for c in near if split(c) not in (split(a), split(opt.start)))
    for config, x in ((a, 130.0), (b, b_x), (c, c_x)):
        opt.tell(config, _m(x))
    assert opt.confirm_or_finish("scripted") == a
    return a, b, c


@pytest.mark.parametrize("c_search, confirmed", [(105.0, True), (90.0, False)])
def test_the_best_of_another_cpu_split_is_confirmed_when_it_measured_close(c_search, confirmed):
    opt = _opt(confirm_buffers=False)
    # a and b share a split; c, another split, measured 19% below a (within 25%) or 31% below
    a, b, c = _split_searched(opt, 125.0, c_search)
    queue = [Masker.key(x) for x in opt.state.confirm_queue]
    assert queue == ([Masker.key(b), Masker.key(c)] if confirmed else [Masker.key(b)])
    if confirmed:  # measured side by side, the other split is the better one
        opt.tell(a, _m(110.0))
        _race(opt, {Masker.key(a): [108.0, 111.0], Masker.key(b): [108.0, 107.0, 109.0], Masker.key(c): [125.0] * 3})
        assert opt.best[0] == c


def test_no_other_split_is_added_when_the_confirmation_holds_two_or_it_is_off():
    for settings, c_search in (({"confirm_buffers": False}, 126.0), ({"confirm_buffers": False, "confirm_split_band": None}, 105.0)):
        opt = _opt(**settings)
        a, b, c = _split_searched(opt, 120.0, c_search)
        expected = {Masker.key(b), Masker.key(c)} if c_search > 120.0 else {Masker.key(b)}
        assert {Masker.key(x) for x in opt.state.confirm_queue} == expected


def test_a_lucky_high_measurement_never_races_alone_nor_does_an_unraced_one_win():
    opt = _opt(confirm_buffers=False)
    opt.state.start_queue = []
    opt.tell(opt.ask(), _m(100.0))
    a, b, c = within_moves(opt.state.masker, opt.start, 1)[:3]
    for config, x in ((a, 200.0), (b, 165.0), (c, 120.0)):  # only a within confirm_band of a's lucky 200
        opt.tell(config, _m(x))
    assert opt.confirm_or_finish("scripted") == a
    assert Masker.key(b) in [Masker.key(x) for x in opt.state.confirm_queue]  # b (within 25%) races too
    opt.tell(a, _m(110.0))
    _race(opt, {Masker.key(b): [150.0] * 5, **{Masker.key(x): [100.0] * 5 for x in opt.state.confirm_queue if x != b}})
    assert opt.best[0] == b  # side by side b beats a by more than race_band: a left after one round
    # a configuration that did not race is never the pick, however high its one measurement
    opt.state.visited[Masker.key(opt.start)] = _m(400.0)
    assert opt.best[0] == b
