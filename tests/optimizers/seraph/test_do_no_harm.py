"""Do no harm: the baseline is kept unless the search's best saves more than the model's error."""

from optimizers.seraph.do_no_harm import keep_baseline_unless_saving
from serverless.run_shape import RunShape
from optimizers.seraph.objectives import make_objective
from optimizers.seraph.search import Candidate, Constraints, choose

BASE = Candidate(RunShape(2, 1769, 4000), 50, 200_000, 30.0, 1.00e-3, 2000)


def _other(cost, time_s=30.0):
    return Candidate(RunShape(4, 1769, 4000), 50, 200_000, time_s, cost, 2000)


def test_a_saving_within_the_model_error_keeps_the_baseline():
    cands = [BASE, _other(0.93e-3)]  # 7% cheaper on paper
    outcome, verdict = keep_baseline_unless_saving(choose(cands, make_objective("cost")), BASE, make_objective("cost"),
                                                   Constraints(), model_error=0.10)
    assert outcome.best == BASE and verdict.chosen == "baseline"
    assert abs(verdict.predicted_saving - 0.07) < 1e-9 and "within the model's error" in verdict.reason


def test_a_saving_beyond_the_model_error_is_taken():
    cheaper = _other(0.80e-3)
    outcome, verdict = keep_baseline_unless_saving(choose([BASE, cheaper], make_objective("cost")), BASE,
                                                   make_objective("cost"), Constraints(), model_error=0.10)
    assert outcome.best == cheaper and verdict.chosen == "search" and verdict.predicted_saving > verdict.model_error


def test_the_saving_is_judged_on_the_objective():
    faster = _other(1.05e-3, time_s=20.0)  # a third faster, 5% dearer
    speed, cost = make_objective("speed"), make_objective("cost")
    assert keep_baseline_unless_saving(choose([BASE, faster], speed), BASE, speed, Constraints(), 0.1)[0].best == faster
    assert keep_baseline_unless_saving(choose([BASE, faster], cost), BASE, cost, Constraints(), 0.1)[0].best == BASE


def test_a_baseline_that_breaks_a_constraint_is_not_kept():
    cheaper = _other(0.95e-3, time_s=10.0)
    constraints = Constraints(deadline_s=20.0)
    outcome, verdict = keep_baseline_unless_saving(choose([BASE, cheaper], make_objective("cost"), constraints), BASE,
                                                   make_objective("cost"), constraints, model_error=0.10)
    assert outcome.best == cheaper and verdict.chosen == "search" and "deadline" in verdict.reason


def test_a_probed_memory_size_within_the_model_error_yields_to_the_pilots_size():
    from optimizers.seraph.do_no_harm import keep_measured_memory

    at_1769 = Candidate(RunShape(2, 1769, 1024), 20, 20_480, 3.0, 1.00e-4, 128)
    at_3008 = Candidate(RunShape(2, 3008, 1024), 20, 20_480, 2.6, 0.95e-4, 128)  # 5% cheaper, from one probe call
    cost = make_objective("cost")
    outcome, note = keep_measured_memory(choose([at_1769, at_3008], cost), [at_1769, at_3008], cost, Constraints(), 0.08, 1769)
    assert outcome.best == at_1769 and note.chosen == 1769 and "within the model's error" in note.reason
    outcome, note = keep_measured_memory(choose([at_1769, at_3008], cost), [at_1769, at_3008], cost, Constraints(), 0.02, 1769)
    assert outcome.best == at_3008 and note.chosen == 3008
    outcome, note = keep_measured_memory(choose([at_1769], cost), [at_1769], cost, Constraints(), 0.08, 1769)
    assert outcome.best == at_1769 and note is None  # already at the pilot's size: nothing to decide


def test_a_large_saving_holds_even_when_the_model_error_is_large():
    # a layout needing a third of the baseline's steps, planned on a profile taken under heavy load
    third = Candidate(RunShape(2, 1769, 1024), 27, 27_648, 4.5, 0.42e-3, 128)
    cost = make_objective("cost")
    outcome, verdict = keep_baseline_unless_saving(choose([BASE, third], cost), BASE, cost, Constraints(), model_error=0.62)
    assert outcome.best == third and verdict.chosen == "search"  # 58% saving; needed 0.62 / 1.62 = 38%
