"""The Seraph request's checks: each bad field is a one-line error that names it."""

from __future__ import annotations

import pytest

from optimizers.seraph.request import RequestError, SeraphRequest, parse_faults
from serverless.run_shape import RunShape


def test_a_fault_spec_is_parsed_once_where_the_request_is_made() -> None:
    from serverless.backends.faults import FaultSpec

    request = SeraphRequest("CartPole-v1", 475, faults=parse_faults("errors=0.1,seed=2"))
    assert request.faults == FaultSpec(errors=0.1, seed=2) and FaultSpec.parse(request.faults_text) == request.faults
    with pytest.raises(RequestError, match=r"^faults: errors must be a rate in \[0, 1\)") as err:
        SeraphRequest.from_dict({"env_id": "CartPole-v1", "target_reward": 475, "faults": "errors=2"})
    assert str(err.value.named("--inject-faults")).startswith("--inject-faults: errors must be")
    with pytest.raises(RequestError) as by_key:  # set by its YAML key, the error still names the field
        SeraphRequest.from_dict({"env_id": "CartPole-v1", "target_reward": 475, "inject_faults": "errors=2"})
    assert by_key.value.field == "faults"
    # the model parses the text itself (the CLI, the YAML and from_dict hand it the text); its
    # value is the parsed spec, whichever way it came in
    assert SeraphRequest("CartPole-v1", 475, faults="errors=0.1,seed=2").faults == request.faults
    with pytest.raises(RequestError, match=r"^faults: give key=value pairs"):
        SeraphRequest("CartPole-v1", 475, faults=3)


def test_the_fault_spec_survives_the_request_round_trip() -> None:
    request = SeraphRequest("CartPole-v1", 475, faults=parse_faults("throttle=0.3,seed=1"))
    assert SeraphRequest.from_dict(request.to_dict()) == request


def test_a_direct_call_names_the_first_failed_field_and_a_workload_names_every_one() -> None:
    from core.errors import UserError
    from optimizers.spec import parse_spec

    with pytest.raises(RequestError) as err:
        SeraphRequest("CartPole-v1", 475, weight=2, seed=-1)
    assert err.value.field == "weight" and "between 0 and 1" in err.value.problem
    with pytest.raises(UserError) as info:
        parse_spec({"rl": {"target_reward": 475, "weight": 2, "seed": -1, "inject_faults": "errors=2"}})
    message = str(info.value)
    assert "rl.weight: must be between 0 and 1" in message and "rl.seed: must be between 0 and 2**32 - 1" in message
    assert "rl.inject_faults: errors must be a rate" in message  # the YAML key, not the field's own name


def test_only_the_declared_fields_go_by_position() -> None:
    assert SeraphRequest("Acrobot-v1", -100) == SeraphRequest(env_id="Acrobot-v1", target_reward=-100)
    with pytest.raises(TypeError, match="at most 2 positional"):
        SeraphRequest("Acrobot-v1", -100, "cost")


def test_the_request_is_frozen() -> None:
    from pydantic import ValidationError

    request = SeraphRequest("CartPole-v1", 475)
    with pytest.raises(ValidationError, match="frozen"):
        request.seed = 3  # type: ignore[misc]


def test_the_baseline_configuration_comes_as_text_or_as_its_json_object() -> None:

    text = SeraphRequest("CartPole-v1", 475, baseline_config="actors=4,memory=1769,batch=2048")
    assert text.baseline_config == RunShape(4, 1769, 2048, 512)
    assert SeraphRequest("CartPole-v1", 475, baseline_config=text.to_dict()["baseline_config"]) == text
    with pytest.raises(RequestError, match=r"^baseline_config: unknown key\(s\) \['actorz'\]"):
        SeraphRequest("CartPole-v1", 475, baseline_config={"actorz": 4, "memory_mb": 1769, "batch": 2048})
    with pytest.raises(RequestError, match=r"^baseline_config: must map .* to whole numbers"):
        SeraphRequest("CartPole-v1", 475, baseline_config={"actors": 2.5, "memory_mb": 1769, "batch": 2048})
