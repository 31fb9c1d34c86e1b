"""InTune's end game on measurements taken at different times: the recommendation among the
confirmed configurations is decided by their back-to-back (paired) measurements, a near-tie is
settled by measuring both once more in reverse order, and the model's level follows the live
measurements from the first one (scripted measurements, no timing)."""

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


def test_a_near_tie_is_settled_in_reverse_order_and_decided_by_paired_measurements():
    opt = _opt(confirm_band=0.3, settle_rounds=1)  # both confirmed despite a's lucky search measurement
    a, b = _searched(opt, 160.0, 125.0)  # a: a lucky search measurement, minutes before the end
    opt.tell(a, _m(110.0))
    assert opt.ask() == b
    opt.tell(b, _m(120.0))
    # the paired measurements (110 vs 120) are within 10%: settle, in the reverse order (b, a)
    assert opt.ask() == b
    opt.tell(b, _m(118.0))
    assert opt.ask() == a
    opt.tell(a, _m(112.0))
    assert opt.ask() is None and opt.finished == "scripted"
    assert opt.state.paired == {Masker.key(a): [110.0, 112.0], Masker.key(b): [120.0, 118.0]}
    # by the mean of all its measurements a would win (127 vs 121); by the paired ones b does
    assert opt.state.visited[Masker.key(a)].rows_per_s > opt.state.visited[Masker.key(b)].rows_per_s
    assert opt.best[0] == b
    report = opt.report()
    assert report["settled"] and {tuple(c["paired_samples"]) for c in report["confirmed"]} == {(110.0, 112.0), (120.0, 118.0)}


def test_a_near_tie_that_stays_near_is_settled_again_in_the_opposite_order():
    opt = _opt(confirm_band=0.3, settle_rounds=2)
    a, b = _searched(opt, 160.0, 125.0)
    opt.tell(a, _m(110.0))
    assert opt.ask() == b
    opt.tell(b, _m(115.0))
    for expected, x in ((b, 114.0), (a, 111.0), (a, 112.0), (b, 113.0)):  # b, a, then a, b
        assert opt.ask() == expected
        opt.tell(expected, _m(x))
    assert opt.ask() is None and opt.report()["settle_rounds"] == 2  # no third round: its limit
    assert opt.state.paired == {Masker.key(a): [110.0, 111.0, 112.0], Masker.key(b): [115.0, 114.0, 113.0]}
    assert opt.best[0] == b


def test_settle_rounds_stop_once_the_two_are_told_apart():
    opt = _opt(confirm_band=0.3, settle_rounds=3)
    a, b = _searched(opt, 160.0, 125.0)
    opt.tell(a, _m(110.0))
    opt.ask()
    opt.tell(b, _m(118.0))
    assert opt.ask() == b
    opt.tell(b, _m(140.0))
    assert opt.ask() == a
    opt.tell(a, _m(100.0))  # paired means 105 against 129: apart, no second round
    assert opt.ask() is None and opt.best[0] == b


def test_no_settle_when_the_confirmation_is_not_a_near_tie():
    opt = _opt()
    a, b = _searched(opt, 130.0, 125.0)
    opt.tell(a, _m(140.0))
    assert opt.ask() == b
    opt.tell(b, _m(110.0))  # 21% apart: no settle
    assert opt.ask() is None
    assert opt.best[0] == a and not opt.report()["settled"]


def test_settle_can_be_switched_off():
    opt = _opt(settle_band=None)
    a, b = _searched(opt, 130.0, 125.0)
    opt.tell(a, _m(120.0))
    assert opt.ask() == b
    opt.tell(b, _m(121.0))
    assert opt.ask() is None


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
    opt = _opt()
    # a and b share a split; c, another split, measured 19% below a (within 25%) or 31% below
    a, b, c = _split_searched(opt, 125.0, c_search)
    queue = [Masker.key(x) for x in opt.state.confirm_queue]
    assert queue == ([Masker.key(b), Masker.key(c)] if confirmed else [Masker.key(b)])
    if confirmed:  # measured back to back, the other split is the better one
        for config, x in ((a, 110.0), (b, 108.0), (c, 125.0)):
            opt.tell(config, _m(x))
            opt.ask()
        assert opt.ask() is None and opt.best[0] == c


def test_no_other_split_is_added_when_the_confirmation_holds_two_or_it_is_off():
    for settings, c_search in (({}, 126.0), ({"confirm_split_band": None}, 105.0)):
        opt = _opt(**settings)
        a, b, c = _split_searched(opt, 120.0, c_search)
        expected = {Masker.key(b), Masker.key(c)} if c_search > 120.0 else {Masker.key(b)}
        assert {Masker.key(x) for x in opt.state.confirm_queue} == expected
