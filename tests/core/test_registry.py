"""The registries (core.registry) and plug-ins: a fake function backend and a fake ingestion
optimizer, each one module-level definition plus one registration, show up in the CLI and
the workload spec, keep the contracts and work end to end on tiny inputs."""

from __future__ import annotations

import json
import random
import time
from pathlib import Path
from typing import Any, Iterator

import numpy as np
import pytest

from core.errors import UserError
from core.registry import Registry, where
from ingestion.knobs import KnobSpace
from ingestion.measurement import Config, Measurement
from ingestion.node import Node
from ingestion.pipeline import PipelineSpec
from ingestion.simulator import dlrm_like_space, random_pipeline, simulate
from optimizers.asktell import run
from optimizers.ingestion_optimizers import INGESTION_OPTIMIZERS, IngestionOptimizer, IngestJob
from optimizers.tuning import build_optimizer
from serverless.backends import BACKENDS, BackendEntry, BackendOption
from serverless.invocation import BillingRecord, Invocation, InvokeBatch, check_memory_mb
from serverless.pricing import billed_ms
from trainwise.cli import main as trainwise_main

# ---------------------------------------------------------------------------------------------
# the registry itself


def test_registry_lookup_names_and_errors() -> None:
    reg: Registry[str] = Registry("colour")
    reg.register("red", "#f00")
    reg.register("green", "#0f0")
    assert reg.get("green") == "#0f0"
    assert reg.names() == ("red", "green") == tuple(reg)
    assert "red" in reg and "blue" not in reg and len(reg) == 2
    with pytest.raises(UserError) as info:
        reg.get("blue")
    assert str(info.value) == "unknown colour 'blue'; allowed: red, green"
    assert "--" not in str(info.value)  # names no CLI flag: the caller adds where the name came from
    assert str(where("--colour", info.value)) == "--colour: unknown colour 'blue'; allowed: red, green"
    with pytest.raises(ValueError, match="already registered"):
        reg.register("red", "#e00")
    reg.unregister("red")
    assert reg.names() == ("green",)


def test_an_entry_registers_under_its_own_name() -> None:
    reg: Registry[Any] = Registry("optimizer")
    entry = IngestionOptimizer("a", lambda req: None, "unused", "a")  # type: ignore[arg-type,return-value]
    with pytest.raises(ValueError, match="declares the name 'a'"):
        reg.register("b", entry)


# ---------------------------------------------------------------------------------------------
# a plug-in function backend: rollouts run in this process, one after the other


class InProcessBackend:
    """Runs the rollout handler in this process; measured wall time, priced as Lambda."""

    name = "inprocess"

    def __init__(self, pause_ms: float = 0.0) -> None:
        self.pause_ms = pause_ms

    def invoke(self, events: list[dict[str, Any]], memory_mb: int, concurrency: int | None = None) -> InvokeBatch:
        from serverless.handler import handler

        check_memory_mb(memory_mb)
        started = time.perf_counter()
        invocations = []
        for event in events:
            t = time.perf_counter()
            try:
                result, error = handler(event, None), None
            except Exception as exc:  # reported per invocation
                result, error = None, f"{type(exc).__name__}: {exc}"
            time.sleep(self.pause_ms / 1000.0)
            ms = (time.perf_counter() - t) * 1000.0
            invocations.append(Invocation(result, BillingRecord(billed_ms(ms), ms, 0.0, memory_mb, error=error,
                                                                label="measured")))
        wall_s = time.perf_counter() - started
        return InvokeBatch(invocations, wall_s, wall_s, "measured", min(concurrency or len(events), len(events)))

    def close(self) -> None:
        pass


INPROCESS = BackendEntry(
    name="inprocess", factory=InProcessBackend, clock="measured", billing=("measured",),
    description="rollouts in this process, one after the other",
    options=(BackendOption("pause_ms", float, "sleep after each rollout (ms)"),), clock_name="run time, in process",
)


# ---------------------------------------------------------------------------------------------
# a plug-in ingestion optimizer: random valid configurations


class RandomSearch:
    """Proposes ``trials`` random configurations within the CPU budget, then stops."""

    name = "random"

    def __init__(self, space: KnobSpace, seed: int = 0, trials: int = 6) -> None:
        self.space, self.left, self.rng = space, trials, random.Random(seed)

    def ask(self) -> Config | None:
        while self.left > 0:
            config = {k.name: self.rng.choice(k.values) for k in self.space.knobs}
            if self.space.is_valid(config):
                self.left -= 1
                return config
        return None

    def tell(self, config: Config, measurement: Measurement) -> None:
        pass


RANDOM = IngestionOptimizer("random", lambda req: RandomSearch(req.spec.space, req.seed), "unused",
                            "random configurations within the CPU budget")


@pytest.fixture
def plugins() -> Iterator[None]:
    BACKENDS.register("inprocess", INPROCESS)
    INGESTION_OPTIMIZERS.register("random", RANDOM)
    try:
        yield
    finally:
        BACKENDS.unregister("inprocess")
        INGESTION_OPTIMIZERS.unregister("random")


def _help(argv: list[str], capsys: pytest.CaptureFixture[str]) -> str:
    with pytest.raises(SystemExit):
        trainwise_main([*argv, "--help"])
    return " ".join(capsys.readouterr().out.split())  # argparse wraps lines


def test_the_cli_lists_the_plugins(plugins: None, capsys: pytest.CaptureFixture[str]) -> None:
    train = _help(["rl", "train"], capsys)
    assert "{local,ray,lambda,inprocess}" in train and "--inprocess-pause-ms" in train
    assert "inprocess: rollouts in this process" in train
    assert "local | ray | lambda | inprocess" in _help(["rl", "tune"], capsys)
    tune = _help(["ingest", "tune"], capsys)
    assert "naive | heuristic | random" in tune  # the request's generated help lists the registry's names
    assert "random random configurations within the CPU budget" in tune  # and says what each one does


def test_the_workload_spec_accepts_the_plugins(plugins: None) -> None:
    from optimizers.spec import parse_spec

    spec = parse_spec({"rl": {"target_reward": 100, "backend": "inprocess"},
                       "ingestion": {"optimizer": "random", "baselines": ["naive"]}})
    assert spec.rl is not None and spec.rl.backend == "inprocess"
    assert spec.ingestion is not None and spec.ingestion.optimizer == "random"


def test_the_plugins_are_gone_after_unregistering() -> None:
    from optimizers.spec import parse_spec

    with pytest.raises(UserError, match="rl.backend: unknown function backend 'inprocess'; allowed: local, ray"):
        parse_spec({"rl": {"target_reward": 100, "backend": "inprocess"}})


def test_the_plugin_backend_keeps_the_contract(plugins: None) -> None:
    from serverless.backends.checker import check_backend

    report = check_backend(InProcessBackend())
    assert report.invocations == 3 and report.failed == 1 and report.billing_labels == ("measured",)


@pytest.mark.slow
def test_the_plugin_backend_trains_through_the_cli(plugins: None, tmp_path: Path,
                                                   capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "train.json"
    code = trainwise_main(["rl", "train", "--env", "CartPole-v1", "--target-reward", "10000", "--max-steps", "256",
                           "--batch", "128", "--actors", "2", "--backend", "inprocess", "--inprocess-pause-ms", "1",
                           "--checkpoint-every", "0", "--no-progress", "--json-out", str(out)])
    assert code == 0
    result = json.loads(out.read_text())
    assert result["config"]["backend"] == "inprocess"
    assert result["config"]["backend_options"] == {"pause_ms": "1.0"}
    assert result["env_steps"] == 256 and result["stop_reason"] == "max_steps"
    assert len(result["iterations"]) == 2  # two rollout batches of 2 functions each
    assert result["lambda_time_label"] == "measured"  # the entry's clock, not the emulator's
    assert "run time, in process (measured):" in capsys.readouterr().out  # the summary names the clock


def test_a_backend_takes_only_the_options_it_declares() -> None:
    from serverless.backends import make_backend

    with pytest.raises(UserError, match="function backend 'ray' takes no option 'max_workers'; its options: address"):
        make_backend("ray", max_workers=2)


def test_an_option_of_another_backend_is_an_error(plugins: None, capsys: pytest.CaptureFixture[str]) -> None:
    code = trainwise_main(["rl", "train", "--env", "CartPole-v1", "--target-reward", "10", "--inprocess-pause-ms", "1"])
    assert code == 2
    assert "--inprocess-pause-ms applies to --backend inprocess, not local" in capsys.readouterr().err


def test_the_plugin_optimizer_keeps_the_contract_and_tunes(plugins: None) -> None:
    from optimizers.checker import check_optimizer

    report = check_optimizer(INGESTION_OPTIMIZERS.get("random").factory)
    assert report.optimizer == "random" and report.trials == 6 and report.stopped_by == "optimizer finished"

    node = Node("sim-4", vcpus=4, ram_gib=8)
    truth = random_pipeline(np.random.default_rng(3), "transform")
    spec = PipelineSpec("sim", build=lambda c: None, space=dlrm_like_space(node), rows_per_element=1)
    job = IngestJob.create(spec, node, time_budget_s=60, seed=1)
    result = run(build_optimizer(job, "random"), lambda c: simulate(truth, c, node))
    assert len(result.trials) == 6 and all(spec.space.is_valid(t.config) for t in result.trials)
    assert result.best is not None and result.best.label == "simulated"
    assert result.best.rows_per_s == max(simulate(truth, t.config, node).rows_per_s for t in result.trials)


def test_the_terraform_lambda_module_allows_the_registered_architectures() -> None:
    """Terraform cannot read the Python registry: its validation list is checked against it."""
    import re

    from serverless.architectures import ARCHITECTURES

    tf = (Path(__file__).resolve().parents[2] / "infra/terraform/modules/rollout_lambda/variables.tf").read_text()
    listed = re.search(r'contains\(\[([^\]]*)\],\s*var\.architecture\)', tf)
    assert listed is not None
    assert re.findall(r'"([^"]+)"', listed.group(1)) == list(ARCHITECTURES.names())


def test_every_architecture_is_priced() -> None:
    from serverless.architectures import ARCHITECTURES
    from serverless.pricing import PriceTable

    table = PriceTable.load()
    assert all(table.gb_second_price(name) > 0 for name in ARCHITECTURES)
    with pytest.raises(UserError, match="unknown Lambda architecture 'sparc'; allowed: x86_64, arm64"):
        table.gb_second_price("sparc")
