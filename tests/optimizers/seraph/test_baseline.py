"""The baseline configuration: its text form, its checks and the static default's layout."""

import pytest

from core.errors import UserError
from optimizers.seraph.baseline import STATIC_DEFAULT_CONFIG, baseline_of, parse_baseline
from serverless.run_shape import RunShape, RunShapeError


def test_the_text_form_parses_and_one_env_per_function_is_the_default_layout():
    full = parse_baseline("actors=2,memory=1769,batch=4000,steps_per_env=2000")
    assert full == STATIC_DEFAULT_CONFIG == parse_baseline(" actors=2, memory_mb=1769, batch=4000 ")
    assert full.without_layout() == RunShape(2, 1769, 4000) and full.layout == (4000, 2000)
    assert parse_baseline("actors=4,memory=885,batch=2048").steps_per_env == 512
    assert baseline_of(RunShape(2, 1769, 4000)) == STATIC_DEFAULT_CONFIG
    assert parse_baseline(STATIC_DEFAULT_CONFIG.describe()) == STATIC_DEFAULT_CONFIG
    # the plain text form leaves the layout to the PPO config; a baseline sets it
    assert RunShape.parse("actors=4,memory=885,batch=2048").steps_per_env is None


@pytest.mark.parametrize(
    "text, field, hint",
    [
        ("actors=two,memory=1769,batch=4000", "actors", "whole number"),
        ("actors=2,memory=1769", "batch", "missing"),
        ("actors=2,memory=99999,batch=4000", "memory_mb", "128-10240"),
        ("actors=2,memory=1769,batch=4000,steps_per_env=3000", "steps_per_env", "1 to batch / actors = 2000"),
        ("actors=2,memory=1769,batch=4000,steps_per_env=0", "steps_per_env", "1 to batch / actors = 2000"),
        ("actors=2,memory=1769,batch=4000,cpus=2", "cpus", "allowed: actors, memory, batch, steps_per_env"),
        ("actors=0,memory=1769,batch=4000", "actors", ">= 1"),
        ("actors=8,memory=1769,batch=4", "batch", ">= actors (8)"),
        ("actors 2", "actors 2", "unknown key"),
    ],
)
def test_bad_text_is_one_line_naming_the_field(text, field, hint):
    with pytest.raises(RunShapeError) as info:
        parse_baseline(text)
    msg = str(info.value)
    assert msg.startswith(f"{field}:") and hint in msg and "\n" not in msg
    assert isinstance(info.value, UserError) and info.value.field == field


def test_the_request_takes_the_text_and_names_its_field():
    from optimizers.seraph.request import RequestError, SeraphRequest

    req = SeraphRequest.from_dict({"env_id": "CartPole-v1", "target_reward": 475, "baseline_config": "actors=4,memory=1769,batch=2048"})
    assert req.baseline_config == RunShape(4, 1769, 2048, 512)
    assert SeraphRequest.from_dict(req.to_dict()) == req
    with pytest.raises(RequestError) as info:
        SeraphRequest.from_dict({"env_id": "CartPole-v1", "target_reward": 475, "baseline_config": "actors=2,batch=4000"})
    assert str(info.value) == "baseline_config: memory_mb: missing in 'actors=2,batch=4000'; needed: actors, memory, batch"
    # a shape given as such is checked as a baseline too: its layout must fit its functions
    with pytest.raises(RequestError, match="baseline_config: steps_per_env: must be 1 to batch / actors = 500"):
        SeraphRequest.from_dict({"env_id": "CartPole-v1", "target_reward": 475,
                                 "baseline_config": RunShape(4, 1769, 2000, 1000)})
