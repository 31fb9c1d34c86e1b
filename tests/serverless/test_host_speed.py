"""The host-speed correction of the modelled clock (serverless/host_speed.py)."""

from __future__ import annotations

from pathlib import Path

import pytest

from optimizers.seraph import records
from serverless import host_speed
from serverless.backends.local import LocalBackend
from serverless.lambda_clock import cpu_share
from serverless.trainer import train
from tests.serverless.backends.test_local import _events
from tests.serverless.test_trainer import InProcessBackend, _spec


def test_factor_is_reference_over_metronome_and_clamped() -> None:
    ref = host_speed.REFERENCE_MS["learner"]
    assert host_speed.factor_from("learner", ref) == pytest.approx(1.0)
    assert host_speed.factor_from("learner", ref * 2) == pytest.approx(0.5)  # a slow moment: CPU time scaled down
    assert host_speed.factor_from("learner", ref / 2) == pytest.approx(2.0)
    assert host_speed.factor_from("learner", ref * 100) == host_speed.MIN_FACTOR
    assert host_speed.factor_from("learner", ref / 100) == host_speed.MAX_FACTOR
    assert host_speed.factor_from("learner", 0.0) == 1.0  # a clock that did not move: no correction


@pytest.mark.parametrize("kind", sorted(host_speed.METRONOMES))
def test_bracket_measures_its_metronome(kind: str, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(host_speed.ENV_DISABLE, raising=False)
    b = host_speed.Bracket(kind)
    b.start()
    factor = b.stop()
    assert b.metronome_ms > 0
    assert factor == b.factor == host_speed.factor_from(kind, b.metronome_ms)


def test_bracket_disabled_runs_no_metronome(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(host_speed.ENV_DISABLE, "1")
    b = host_speed.Bracket("rollout")
    b.start()
    assert b.stop() == 1.0 and b.metronome_ms == 0.0


def test_unknown_metronome_is_named() -> None:
    with pytest.raises(ValueError, match="unknown metronome 'gpu'"):
        host_speed.Bracket("gpu")


def test_emulator_bills_the_corrected_cpu_time_and_keeps_the_raw() -> None:
    b = LocalBackend(max_workers=1)
    try:
        b.invoke(_events(1), memory_mb=885, concurrency=1)  # cold start out of the way
        batch = b.invoke(_events(1), memory_mb=885, concurrency=1)
    finally:
        b.close()
    inv = batch.invocations[0]
    emu = inv.result["emulator"]
    assert host_speed.MIN_FACTOR <= emu["host_speed"] <= host_speed.MAX_FACTOR
    # the modelled duration is the raw CPU time, corrected, at the function's CPU share
    expected = emu["measured_cpu_ms"] * emu["host_speed"] / cpu_share(885)
    assert inv.billing.duration_ms == pytest.approx(expected)


class _ModelledInProcess(InProcessBackend):
    """The in-process test backend, labelled like the emulator (a modelled clock)."""

    def invoke(self, events, memory_mb, concurrency=None):  # type: ignore[no-untyped-def]
        batch = super().invoke(events, memory_mb, concurrency)
        batch.lambda_s_label = "modelled"
        return batch


@pytest.mark.parametrize("backend_cls, modelled", [(InProcessBackend, False), (_ModelledInProcess, True)])
def test_trainer_corrects_only_the_modelled_clock(tmp_path: Path, backend_cls: type, modelled: bool) -> None:
    result = train(_spec(tmp_path), backend=backend_cls(), progress=False)
    assert len(result.iterations) == 2
    for rec in result.iterations:
        if modelled:
            assert host_speed.MIN_FACTOR <= rec.host_speed <= host_speed.MAX_FACTOR
            # Seraph's models read the learner's time on the same corrected clock
            assert records.view(rec).learner_s == pytest.approx(rec.learner_cpu_s * rec.host_speed)
        else:
            assert rec.host_speed == 1.0
            assert records.view(rec).learner_s == rec.learner_s  # measured: wall time, uncorrected
