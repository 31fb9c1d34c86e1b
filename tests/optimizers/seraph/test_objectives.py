"""Seraph's objectives registry: the built-in objectives' keys and tie-breaks, and a new
objective added with one class and one registration reaching the search, the request,
the workload spec and the CLI."""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

import pytest

from core.errors import UserError
from serverless.run_shape import RunShape
from optimizers.seraph.objectives import OBJECTIVES, TIE_TOLERANCE, Balanced, Cost, Objective, Speed, make_objective
from optimizers.seraph.search import Candidate, choose


@dataclass(frozen=True)
class SumOfShares(Objective):
    """A test objective: time and cost, each over its scale, added up; ties by cost."""

    name: ClassVar[str] = "sum-test"

    def value(self, cost, time_s, scale=(1.0, 1.0)):
        return time_s / scale[1] + cost / scale[0]

    def tie_break(self, cost, time_s):
        return cost


@pytest.fixture
def registered():
    OBJECTIVES.register(SumOfShares)
    yield SumOfShares
    OBJECTIVES.unregister(SumOfShares.name)


def test_the_built_in_objectives_are_registered_in_order():
    assert OBJECTIVES.names() == ("cost", "speed", "balanced")
    assert [OBJECTIVES.get(n) for n in OBJECTIVES.names()] == [Cost, Speed, Balanced]


def test_keys_and_tie_breaks():
    assert Cost().order(2.0, 5.0) == (2.0, 5.0)
    assert Speed().order(2.0, 5.0) == (5.0, 2.0)
    assert Balanced(0.25).value(2.0, 5.0, (4.0, 10.0)) == pytest.approx(0.25 * 0.5 + 0.75 * 0.5)
    # within the tolerance the other figure decides; outside it, the objective's own
    figures = {"a": (1.0, 10.0), "b": (1.0 * (1 + TIE_TOLERANCE / 2), 8.0), "c": (1.1, 1.0)}
    assert Cost().best(figures, figures.__getitem__) == "b"
    assert Speed().best(figures, figures.__getitem__) == "c"
    assert Balanced(1.0).best(figures, figures.__getitem__) == "a"  # no tolerance: exact value wins


def test_unknown_name_and_bad_weight_are_user_errors_that_name_no_flag():
    with pytest.raises(UserError, match=r"^unknown Seraph objective 'cheapest'; allowed: cost, speed, balanced$"):
        OBJECTIVES.get("cheapest")
    with pytest.raises(UserError, match="^weight must be between 0 and 1"):
        make_objective("balanced", 1.5)


def test_a_registered_objective_reaches_the_search_the_request_the_spec_and_the_cli(registered, capsys):
    from optimizers.seraph.request import SeraphRequest
    from optimizers.spec import parse_spec
    from trainwise.cli import main

    cands = [Candidate(RunShape(a, 1769, 1024), 10, 10_240, t, c) for a, t, c in ((1, 9.0, 1e-3), (2, 5.0, 4e-3), (4, 4.0, 2e-2))]
    # on the front's scale (cost 0.02, time 9): 5/9 + 0.2 beats 9/9 + 0.05 and 4/9 + 1
    assert choose(cands, make_objective("sum-test")).best == cands[1]
    assert choose(cands, Cost()).best == cands[0] and choose(cands, Speed()).best == cands[2]
    assert SeraphRequest("CartPole-v1", 100, objective="sum-test").objective_obj() == registered()
    assert parse_spec({"rl": {"target_reward": 100, "objective": "sum-test"}}).rl.objective == "sum-test"
    with pytest.raises(SystemExit):
        main(["rl", "tune", "--help"])
    assert "sum-test" in capsys.readouterr().out


def test_front_ends_name_the_field_as_their_user_wrote_it(capsys):
    from optimizers.seraph.request import RequestError, SeraphRequest
    from optimizers.spec import parse_spec
    from trainwise.cli import main

    with pytest.raises(RequestError, match=r"^objective: unknown Seraph objective 'fast'") as err:
        SeraphRequest("CartPole-v1", 100, objective="fast")
    assert err.value.field == "objective"
    with pytest.raises(UserError, match=r"rl\.objective: unknown Seraph objective 'fast'"):
        parse_spec({"rl": {"target_reward": 100, "objective": "fast"}})
    with pytest.raises(UserError, match=r"rl\.replan_every: must be >= 1"):
        parse_spec({"rl": {"target_reward": 100, "replan_every": 0}})
    assert main(["rl", "tune", "--env", "CartPole-v1", "--target-reward", "100", "--objective", "fast"]) == 2
    assert "--objective: unknown Seraph objective 'fast'" in capsys.readouterr().err
    assert main(["rl", "tune", "--env", "CartPole-v1", "--target-reward", "100", "--objective", "cost", "--replan-every", "0"]) == 2
    assert "--replan-every: must be >= 1" in capsys.readouterr().err


def test_the_request_round_trips_through_json():
    import json

    from optimizers.seraph.request import SeraphRequest

    req = SeraphRequest("CartPole-v1", 475, objective="balanced", weight=0.3, deadline_s=60.0, seed=2)
    assert SeraphRequest.from_dict(json.loads(json.dumps(req.to_dict()))) == req
    with pytest.raises(UserError, match="unknown Seraph request field"):
        SeraphRequest.from_dict({**req.to_dict(), "objectiv": "cost"})
