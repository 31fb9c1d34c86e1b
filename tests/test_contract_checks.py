"""The contract checks over every registered function backend and ingestion optimizer.

Backends: ``local`` runs as it is; ``ray`` on a one-CPU local Ray (slow: Ray takes seconds
to start); ``lambda`` against moto's server with the stand-in for Lambda's data plane of
``tests.serverless.backends.test_lambda_backend`` (moto cannot run the function itself), which answers the malformed probe
event with a function error as Lambda would. Optimizers: against ``ingestion.simulator`` (InTune's case is slow: it refits its model after every trial)."""

from __future__ import annotations

from typing import Any

import pytest

from optimizers.checker import OptimizerContractError, check_optimizer, config_problem, check_problem
from optimizers.ingestion_optimizers import INGESTION_OPTIMIZERS
from serverless.backends import BACKENDS, make_backend
from serverless.backends.checker import BAD_ACTOR_ID, BackendContractError, check_backend, probe_events
from serverless.invocation import InvokeBatch
from tests.serverless.backends.test_lambda_backend import aws, deployed, hooked, moto_url  # noqa: F401  (fixtures for the lambda case)


def _local(request: pytest.FixtureRequest) -> Any:
    return make_backend("local", max_workers=2)


def _ray(request: pytest.FixtureRequest) -> Any:
    import ray  # a dependency: a broken install fails here rather than skipping

    if not ray.is_initialized():
        ray.init(num_cpus=1, include_dashboard=False, log_to_driver=False)
        request.addfinalizer(ray.shutdown)  # stopped at teardown even if building or checking the backend fails
    return make_backend("ray")


def _lambda(request: pytest.FixtureRequest) -> Any:
    from serverless.backends.lambda_backend import LambdaBackend

    config = request.getfixturevalue("deployed")["config_path"]
    backend = LambdaBackend.from_config_file(config, waiter_delay_s=1)
    hooked(backend, lambda actor, attempt: "error" if actor == BAD_ACTOR_ID else "ok")
    return backend


BUILDERS = {"local": _local, "ray": _ray, "lambda": _lambda}


def _backend_params() -> list[Any]:
    slow = {"ray"}
    return [pytest.param(name, marks=[pytest.mark.slow] if name in slow else []) for name in BACKENDS.names()]


@pytest.mark.parametrize("name", _backend_params())
def test_every_registered_backend_keeps_the_contract(name: str, request: pytest.FixtureRequest) -> None:
    build = BUILDERS.get(name)
    assert build is not None, f"backend {name!r} is registered but this test does not know how to build it"
    backend = build(request)
    try:
        report = check_backend(backend)
    finally:
        backend.close()
    entry = BACKENDS.get(name)
    assert report.backend == name and report.invocations == 3 and report.failed == 1
    assert set(report.billing_labels) <= set(entry.billing) and report.clock_label == entry.clock


@pytest.mark.parametrize("name", [pytest.param(n, marks=[pytest.mark.slow] if n == "intune" else [])
                                  for n in INGESTION_OPTIMIZERS.names()])
def test_every_registered_optimizer_keeps_the_contract(name: str, tmp_path: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TRAINWISE_HOME", str(tmp_path))  # InTune saves its fine-tuned agent there
    report = check_optimizer(INGESTION_OPTIMIZERS.get(name).factory, max_trials=10)
    assert report.optimizer == name and 1 <= report.trials <= 10


# -- the checks themselves catch broken implementations ----------------------------------------


class _Broken:
    """Wraps the local backend and breaks one promise."""

    name = "local"

    def __init__(self, how: str) -> None:
        self.how, self.inner = how, make_backend("local", max_workers=1)

    def invoke(self, events: list[dict[str, Any]], memory_mb: int, concurrency: int | None = None) -> InvokeBatch:
        if self.how == "raises":
            raise RuntimeError("a function failed")
        batch = self.inner.invoke(events, memory_mb, concurrency)
        if self.how == "drops":
            batch.invocations = batch.invocations[:-1]
        elif self.how == "relabels":
            batch.lambda_s_label = "measured"
        return batch

    def close(self) -> None:
        self.inner.close()


@pytest.mark.parametrize(("how", "match"), [("raises", "a function failed"), ("drops", "2 invocations for 3 events"),
                                            ("relabels", "clock labelled 'measured', its entry declares 'modelled'")])
def test_the_backend_check_catches_a_broken_backend(how: str, match: str) -> None:
    backend = _Broken(how)
    try:
        with pytest.raises((BackendContractError, RuntimeError), match=match):
            check_backend(backend, events=probe_events(good=2, num_steps=8))
    finally:
        backend.close()


class _OutOfSpace:
    name = "outofspace"

    def __init__(self, req: Any) -> None:
        self.space = req.spec.space

    def ask(self) -> dict[str, int]:
        return {**self.space.initial(), self.space.knobs[0].name: 10_000}

    def tell(self, config: Any, measurement: Any) -> None:
        pass


def test_the_optimizer_check_catches_a_configuration_outside_the_space() -> None:
    with pytest.raises(OptimizerContractError, match="is not one of"):
        check_optimizer(_OutOfSpace)
    request, _ = check_problem()
    assert config_problem({"read_threads": 1}, request.spec) is not None
    assert config_problem(request.spec.space.initial(), request.spec) is None
