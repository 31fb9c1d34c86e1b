"""The Seraph request's checks: each bad field is a one-line error that names it."""

from __future__ import annotations

import pytest

from optimizers.seraph.request import RequestError, SeraphRequest, parse_faults


def test_a_fault_spec_is_parsed_once_where_the_request_is_made() -> None:
    from serverless.backends.faults import FaultSpec

    request = SeraphRequest("CartPole-v1", 475, faults=parse_faults("errors=0.1,seed=2"))
    assert request.faults == FaultSpec(errors=0.1, seed=2) and FaultSpec.parse(request.faults_text) == request.faults
    with pytest.raises(RequestError, match=r"^faults: errors must be a rate in \[0, 1\)") as err:
        SeraphRequest.from_dict({"env_id": "CartPole-v1", "target_reward": 475, "faults": "errors=2"})
    assert str(err.value.named("--inject-faults")).startswith("--inject-faults: errors must be")
    with pytest.raises(RequestError, match=r"^faults: must be a parsed fault spec"):
        SeraphRequest("CartPole-v1", 475, faults="errors=0.1")  # text is parsed before the request is made


def test_the_fault_spec_survives_the_request_round_trip() -> None:
    request = SeraphRequest("CartPole-v1", 475, faults=parse_faults("throttle=0.3,seed=1"))
    assert SeraphRequest.from_dict(request.to_dict()) == request
