"""The baseline configuration: its text form, its checks and the static default's layout."""

import pytest

from core.errors import UserError
from optimizers.seraph.baseline import STATIC_DEFAULT_CONFIG, BaselineConfig, BaselineConfigError
from optimizers.seraph.models import RunShape


def test_the_text_form_parses_and_one_env_per_function_is_the_default_layout():
    full = BaselineConfig.parse("actors=2,memory=1769,batch=4000,steps_per_env=2000")
    assert full == STATIC_DEFAULT_CONFIG == BaselineConfig.parse(" actors=2, memory_mb=1769, batch=4000 ")
    assert full.shape == RunShape(2, 1769, 4000) and full.layout == (4000, 2000)
    assert BaselineConfig.parse("actors=4,memory=885,batch=2048").steps_per_env == 512
    assert BaselineConfig.one_env_per_function(RunShape(2, 1769, 4000)) == STATIC_DEFAULT_CONFIG


@pytest.mark.parametrize(
    "text, field, hint",
    [
        ("actors=two,memory=1769,batch=4000", "actors", "whole number"),
        ("actors=2,memory=1769", "batch", "missing"),
        ("actors=2,memory=99999,batch=4000", "memory_mb", "128-10240"),
        ("actors=2,memory=1769,batch=4000,steps_per_env=3000", "steps_per_env", "at most batch / actors = 2000"),
        ("actors=2,memory=1769,batch=4000,cpus=2", "cpus", "allowed: actors, memory, batch, steps_per_env"),
        ("actors=0,memory=1769,batch=4000", "actors", ">= 1"),
        ("actors 2", "actors 2", "unknown key"),
    ],
)
def test_bad_text_is_one_line_naming_the_field(text, field, hint):
    with pytest.raises(BaselineConfigError) as info:
        BaselineConfig.parse(text)
    msg = str(info.value)
    assert msg.startswith(f"{field}:") and hint in msg and "\n" not in msg
    assert isinstance(info.value, UserError)


def test_the_request_takes_the_text_and_names_its_field():
    from optimizers.seraph.request import RequestError, SeraphRequest

    req = SeraphRequest.from_dict({"env_id": "CartPole-v1", "target_reward": 475, "baseline_config": "actors=4,memory=1769,batch=2048"})
    assert req.baseline_config == BaselineConfig(4, 1769, 2048, 512)
    assert SeraphRequest.from_dict(req.to_dict()) == req
    with pytest.raises(RequestError) as info:
        SeraphRequest.from_dict({"env_id": "CartPole-v1", "target_reward": 475, "baseline_config": "actors=2,batch=4000"})
    assert str(info.value) == "baseline_config: memory_mb: missing in 'actors=2,batch=4000'; needed: actors, memory, batch"
