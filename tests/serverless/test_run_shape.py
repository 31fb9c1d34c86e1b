"""The run shape: one frozen value for the trainer, the search space, the baseline and the results."""

import json

import numpy as np
import pytest

from core.errors import UserError
from serverless.run_shape import RunShape, RunShapeError


@pytest.mark.parametrize(
    "kwargs, field, hint",
    [
        ({"actors": 0}, "actors", "a whole number >= 1, got 0"),
        ({"actors": True}, "actors", "a whole number >= 1"),
        ({"actors": 2.0}, "actors", "a whole number >= 1"),
        ({"memory_mb": 100}, "memory_mb", "128-10240 MB (Lambda's range), got 100"),
        ({"memory_mb": "1769"}, "memory_mb", "a whole number"),
        ({"actors": 8, "batch": 4}, "batch", "a whole number >= actors (8)"),
        ({"steps_per_env": -1}, "steps_per_env", "None (the PPO config's layout) or a whole number >= 0"),
    ],
)
def test_a_wrong_field_is_one_line_naming_it(kwargs, field, hint):
    with pytest.raises(RunShapeError) as info:
        RunShape(**kwargs)
    assert isinstance(info.value, UserError) and info.value.field == field
    assert str(info.value).startswith(f"{field}: must be ") and hint in str(info.value)


def test_numpy_integers_become_ints():
    shape = RunShape(np.int64(2), np.int32(1769), np.int64(4000), np.int64(0))
    assert shape == RunShape(2, 1769, 4000, 0)
    assert all(type(v) is int for v in (shape.actors, shape.memory_mb, shape.batch, shape.steps_per_env))
    assert json.dumps(shape.to_dict())  # plain JSON


def test_fragments_split_the_batch_and_steps_per_actor_is_the_longest():
    shape = RunShape(3, 1769, 10)
    assert shape.fragments() == [4, 3, 3] and sum(shape.fragments()) == 10
    assert shape.steps_per_actor == 4 == max(shape.fragments())


def test_the_layout_takes_part_in_equality_and_a_point_leaves_it_out():
    point, laid_out = RunShape(2, 1769, 4000), RunShape(2, 1769, 4000, 2000)
    assert point != laid_out and hash(point) != hash(laid_out)
    assert laid_out.without_layout() == point and point.without_layout() is point
    assert point.one_env_per_function() == laid_out
    scores = {RunShape(a, 1769, 4000): a for a in (1, 2, 4)}  # search-space points key dicts
    assert scores[laid_out.without_layout()] == 2


def test_the_json_form_is_the_three_numbers_of_a_point_and_round_trips():
    assert RunShape(2, 1769, 4000).to_dict() == {"actors": 2, "memory_mb": 1769, "batch": 4000}
    assert RunShape(2, 1769, 4000, 0).to_dict() == {"actors": 2, "memory_mb": 1769, "batch": 4000, "steps_per_env": 0}
    for shape in (RunShape(2, 1769, 4000), RunShape(2, 1769, 4000, 0), RunShape(5, 885, 512, 64)):
        assert RunShape.from_dict(json.loads(json.dumps(shape.to_dict()))) == shape
        assert RunShape.parse(shape.describe()) == shape


def test_check_layout_wants_a_layout_every_function_runs():
    assert RunShape(2, 1769, 4000, 2000).check_layout() == RunShape(2, 1769, 4000, 2000)
    for spe in (None, 0, 2001):
        with pytest.raises(RunShapeError, match=r"^steps_per_env: must be 1 to batch / actors = 2000"):
            RunShape(2, 1769, 4000, spe).check_layout()
