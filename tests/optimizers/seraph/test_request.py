"""The Seraph request's checks: each bad field is a one-line error that names it."""

from __future__ import annotations

import pytest

from optimizers.seraph.request import RequestError, SeraphRequest


def test_a_fault_spec_is_checked_where_the_request_is_made() -> None:
    assert SeraphRequest("CartPole-v1", 475, faults="errors=0.1,seed=2").faults == "errors=0.1,seed=2"
    with pytest.raises(RequestError, match=r"^faults: errors must be a rate in \[0, 1\)") as err:
        SeraphRequest("CartPole-v1", 475, faults="errors=2")
    assert str(err.value.named("--inject-faults")).startswith("--inject-faults: errors must be")


def test_the_fault_spec_survives_the_request_round_trip() -> None:
    request = SeraphRequest("CartPole-v1", 475, faults="throttle=0.3,seed=1")
    assert SeraphRequest.from_dict(request.to_dict()) == request
